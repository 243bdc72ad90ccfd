//! Tokens: create (the secret shown once), list, revoke. Admins manage every token; a
//! boundary-admin manages developer tokens of its boundary.

use palisade_api_types::view::{CreatedToken, NewToken, TokenList, TokenView};
use palisade_store::{StoreError, TokenRecord};

use crate::caller::{hash_secret, new_token_secret, Caller, Role};
use crate::error::{AppError, AppResult};
use crate::paging::PageRequest;
use crate::App;

fn view(record: TokenRecord) -> TokenView {
    TokenView {
        id: record.id,
        role: record.role,
        boundary: record.boundary,
        created_at: record.created_at,
        expires_at: record.expires_at,
        created_by: record.created_by,
    }
}

impl App {
    /// The checks that come before a token body's own errors (SPEC 2.4): a caller that
    /// manages no tokens is 403 whatever its body says (its body need not be read), then a
    /// boundary the body names that the caller cannot see is 404.
    pub async fn may_create_tokens(&self, caller: &Caller, named: Option<&str>) -> AppResult<()> {
        caller.require_boundary_admin()?;
        if let Some(boundary) = named {
            if palisade_policy::Name::parse(boundary).is_ok() {
                self.visible_boundary(caller, boundary).await?;
            }
        }
        Ok(())
    }

    /// Creates a token; its secret is in the answer only.
    pub async fn create_token(&self, caller: &Caller, new: NewToken) -> AppResult<CreatedToken> {
        self.may_create_tokens(caller, new.boundary.as_deref())
            .await?;
        self.admit_write(caller, new.boundary.as_deref())?;
        let role = match (new.role.as_str(), new.boundary.as_deref()) {
            ("admin", None) => Role::Admin,
            ("admin", Some(_)) => {
                return Err(AppError::invalid(
                    "/boundary",
                    "an admin token has no boundary",
                ))
            }
            ("boundary-admin" | "developer", None) => {
                return Err(AppError::invalid(
                    "/boundary",
                    format!("is required for a {} token", new.role),
                ))
            }
            ("boundary-admin", Some(b)) => Role::BoundaryAdmin(b.to_owned()),
            ("developer", Some(b)) => Role::Developer(b.to_owned()),
            (other, _) => {
                return Err(AppError::invalid(
                    "/role",
                    format!("unknown role '{other}'; roles are admin, boundary-admin, developer"),
                ))
            }
        };
        if let Some(days) = new.expires_in_days {
            if !(1..=3650).contains(&days) {
                return Err(AppError::invalid(
                    "/expires_in_days",
                    format!("must be from 1 to 3650, got {days}"),
                ));
            }
        }
        if let Some(boundary) = role.boundary() {
            self.visible_boundary(caller, boundary).await?;
        }
        let allowed = match (&caller.role, &role) {
            (Role::Admin, _) => true,
            (Role::BoundaryAdmin(own), Role::Developer(b)) => own == b,
            _ => false,
        };
        if !allowed {
            return Err(AppError::Forbidden(format!(
                "a {} token cannot create {} tokens",
                caller.role.name(),
                role.name()
            )));
        }
        let (id, secret) = new_token_secret();
        let now = chrono::Utc::now();
        let record = TokenRecord {
            id,
            secret_sha256: hash_secret(&secret),
            role: role.name().to_owned(),
            boundary: role.boundary().map(str::to_owned),
            created_at: palisade_store::now(),
            expires_at: new.expires_in_days.map(|days| {
                (now + chrono::Duration::days(i64::from(days)))
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            }),
            created_by: caller.actor(),
        };
        self.store
            .create_token(record.clone())
            .await
            .map_err(|e| AppError::from_store(e, "token"))?;
        Ok(CreatedToken {
            token: view(record),
            secret,
        })
    }

    /// A page of the tokens the caller manages, by id.
    pub async fn list_tokens(&self, caller: &Caller, page: &PageRequest) -> AppResult<TokenList> {
        caller.require_boundary_admin()?;
        page.limit()?;
        let records = self
            .store
            .list_tokens(caller.role.boundary())
            .await
            .map_err(|e| AppError::from_store(e, "token"))?;
        let mut views: Vec<TokenView> = records.into_iter().map(view).collect();
        views.sort_by(|a, b| a.id.cmp(&b.id));
        let page = page.page(&self.continue_tokens(), "tokens", views, |t| t.id.clone())?;
        Ok(TokenList {
            items: page.items,
            continue_token: page.continue_token,
        })
    }

    /// Revokes a token the caller manages; never the last admin token that has not expired
    /// (409: with none left, no one could manage tokens or clusters again).
    pub async fn revoke_token(&self, caller: &Caller, id: &str) -> AppResult<()> {
        let not_found = || AppError::NotFound(format!("token '{id}' not found"));
        let record = self.store.get_token(id).await.map_err(|e| match e {
            StoreError::NotFound => not_found(),
            other => AppError::from_store(other, "token"),
        })?;
        // A token of a boundary the caller cannot see is not there for it (404 before 403).
        if record.boundary.as_deref().is_some_and(|b| !caller.sees(b))
            || (record.boundary.is_none() && !caller.is_admin())
        {
            return Err(not_found());
        }
        caller.require_boundary_admin()?;
        self.admit_write(caller, record.boundary.as_deref())?;
        let target = Role::from_record(&record.role, record.boundary.as_deref());
        match (&caller.role, &target) {
            (Role::Admin, _) => {}
            (Role::BoundaryAdmin(own), Some(Role::Developer(b))) if own == b => {}
            (Role::BoundaryAdmin(own), Some(role)) if role.boundary() == Some(own.as_str()) => {
                return Err(AppError::Forbidden(
                    "a boundary-admin token can revoke developer tokens only".into(),
                ))
            }
            _ => return Err(not_found()),
        }
        self.store.delete_token(id).await.map_err(|e| match e {
            StoreError::NotFound => not_found(),
            // The only conflict: no admin token would be left.
            StoreError::Conflict(_) => AppError::Conflict(format!(
                "token '{id}' is the last admin token: create another admin token first"
            )),
            other => AppError::from_store(other, "token"),
        })?;
        Ok(())
    }
}
