//! Bearer tokens and roles (SPEC 4.1): tokens are random, shown once and stored only as a
//! SHA-256; a caller is an admin, or a boundary-admin or developer of one boundary.

use std::path::Path;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use base64::Engine;
use palisade_store::{StoreError, TokenRecord};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::ApiError;
use crate::AppState;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Admin,
    BoundaryAdmin(String),
    Developer(String),
}

impl Role {
    pub fn name(&self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::BoundaryAdmin(_) => "boundary-admin",
            Role::Developer(_) => "developer",
        }
    }

    pub fn boundary(&self) -> Option<&str> {
        match self {
            Role::Admin => None,
            Role::BoundaryAdmin(b) | Role::Developer(b) => Some(b),
        }
    }

    pub fn from_record(role: &str, boundary: Option<&str>) -> Option<Role> {
        match (role, boundary) {
            ("admin", None) => Some(Role::Admin),
            ("boundary-admin", Some(b)) => Some(Role::BoundaryAdmin(b.to_owned())),
            ("developer", Some(b)) => Some(Role::Developer(b.to_owned())),
            _ => None,
        }
    }
}

/// The authenticated caller of a request.
#[derive(Clone, Debug)]
pub struct Caller {
    pub token_id: String,
    pub role: Role,
}

impl Caller {
    /// Who the history records: `token:<id> (<role>)`.
    pub fn actor(&self) -> String {
        format!("token:{} ({})", self.token_id, self.role.name())
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Whether the caller may see boundary `b` at all (others answer 404).
    pub fn sees(&self, boundary: &str) -> bool {
        match self.role.boundary() {
            None => true,
            Some(own) => own == boundary,
        }
    }

    /// 404 unless the caller may see boundary `b`.
    pub fn require_visible(&self, boundary: &str) -> Result<(), ApiError> {
        if self.sees(boundary) {
            Ok(())
        } else {
            Err(boundary_not_found(boundary))
        }
    }

    /// 403 unless the caller is an admin or a boundary-admin (of a boundary it sees).
    pub fn require_boundary_admin(&self) -> Result<(), ApiError> {
        match self.role {
            Role::Admin | Role::BoundaryAdmin(_) => Ok(()),
            Role::Developer(_) => Err(ApiError::Forbidden(
                "this needs the role admin or boundary-admin; the token is a developer token"
                    .into(),
            )),
        }
    }

    /// 403 unless the caller is an admin.
    pub fn require_admin(&self) -> Result<(), ApiError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "this needs the role admin; the token is a {} token",
                self.role.name()
            )))
        }
    }
}

pub fn boundary_not_found(boundary: &str) -> ApiError {
    ApiError::NotFound(format!("boundary '{boundary}' not found"))
}

/// A new token's secret text: `pal_<id>_<secret>`, 128 bits of id+secret randomness at least
/// (the secret alone carries 256 bits).
pub fn new_token_secret() -> (String, String) {
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut id);
    rand::rngs::OsRng.fill_bytes(&mut secret);
    let id = hex::encode(id);
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    let token = format!("pal_{id}_{secret}");
    (id, token)
}

pub fn hash_secret(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::Unauthorized("missing Authorization: Bearer <token> header".into())
            })?;
        // The scheme is case-insensitive (RFC 9110 11.1).
        let token = header
            .to_str()
            .ok()
            .map(str::trim)
            .and_then(|h| h.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::Unauthorized("the Authorization header must be 'Bearer <token>'".into())
            })?;
        // The token lookup counts against the request's store bound (SPEC 2.4): on a plan
        // path the whole answer, not each step, is bounded by `policy_timeout`.
        let deadline =
            crate::serving::deadline_of(state, parts.extensions.get::<crate::serving::Started>());
        match tokio::time::timeout_at(deadline, caller_from_token(state, token)).await {
            Ok(result) => result,
            Err(_) => Err(ApiError::Unavailable(
                "the store did not answer the token lookup in time".into(),
            )),
        }
    }
}

/// Resolves a bearer token to its caller: 401 when unknown or expired. Shared by the API's
/// extractor and the portal's session.
pub async fn caller_from_token(state: &AppState, token: &str) -> Result<Caller, ApiError> {
    let invalid = || ApiError::Unauthorized("the token is not valid".into());
    let record = match state.store.token_by_secret_hash(&hash_secret(token)).await {
        Ok(record) => record,
        Err(StoreError::NotFound) => return Err(invalid()),
        Err(other) => return Err(ApiError::from_store(other, "token")),
    };
    if let Some(expires) = &record.expires_at {
        if expires.as_str() <= palisade_store::now().as_str() {
            return Err(ApiError::Unauthorized("the token has expired".into()));
        }
    }
    let role = Role::from_record(&record.role, record.boundary.as_deref())
        .ok_or_else(|| ApiError::Internal(format!("token {} has a bad role", record.id)))?;
    Ok(Caller {
        token_id: record.id,
        role,
    })
}

/// On first start with an empty store, makes an admin token and writes it to
/// `<data_dir>/admin.token` (mode 0600). Returns the path when a token was made.
pub async fn bootstrap_admin(
    store: &dyn palisade_store::Store,
    data_dir: &Path,
) -> Result<Option<std::path::PathBuf>, BootstrapError> {
    let (id, token) = new_token_secret();
    let record = TokenRecord {
        id,
        secret_sha256: hash_secret(&token),
        role: "admin".into(),
        boundary: None,
        created_at: palisade_store::now(),
        expires_at: None,
        created_by: "bootstrap".into(),
    };
    if !store.bootstrap_admin_token(record).await? {
        return Ok(None);
    }
    let path = data_dir.join("admin.token");
    write_private(&path, format!("{token}\n").as_bytes()).map_err(|source| {
        BootstrapError::Write {
            path: path.clone(),
            source,
        }
    })?;
    Ok(Some(path))
}

/// Writes a file readable by its owner only (mode 0600), replacing it atomically.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(&tmp)?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("could not create the admin token in the store")]
    Store(#[from] StoreError),
    #[error("could not write {path}")]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}
