//! Bearer tokens and roles (SPEC 4.1): tokens are random, shown once and stored only as a
//! SHA-256; a caller is an admin, or a boundary-admin or developer of one boundary.

use std::path::Path;

use base64::Engine;
use palisade_store::{StoreError, TokenRecord};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::{boundary_not_found, AppError};
use crate::App;

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
    pub fn require_visible(&self, boundary: &str) -> Result<(), AppError> {
        if self.sees(boundary) {
            Ok(())
        } else {
            Err(boundary_not_found(boundary))
        }
    }

    /// 403 unless the caller is an admin or a boundary-admin (of a boundary it sees).
    pub fn require_boundary_admin(&self) -> Result<(), AppError> {
        match self.role {
            Role::Admin | Role::BoundaryAdmin(_) => Ok(()),
            Role::Developer(_) => Err(AppError::Forbidden(
                "this needs the role admin or boundary-admin; the token is a developer token"
                    .into(),
            )),
        }
    }

    /// 403 unless the caller is an admin.
    pub fn require_admin(&self) -> Result<(), AppError> {
        if self.is_admin() {
            Ok(())
        } else {
            Err(AppError::Forbidden(format!(
                "this needs the role admin; the token is a {} token",
                self.role.name()
            )))
        }
    }
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

/// Resolves a bearer token to its caller: `Unauthorized` when unknown or expired. Used by
/// the API's extractor and the portal's session alike.
pub async fn caller_from_token(state: &App, token: &str) -> Result<Caller, AppError> {
    let invalid = || AppError::Unauthorized("the token is not valid".into());
    let record = match state.store.token_by_secret_hash(&hash_secret(token)).await {
        Ok(record) => record,
        Err(StoreError::NotFound) => return Err(invalid()),
        Err(other) => return Err(AppError::from_store(other, "token")),
    };
    if let Some(expires) = &record.expires_at {
        if expires.as_str() <= palisade_store::now().as_str() {
            return Err(AppError::Unauthorized("the token has expired".into()));
        }
    }
    let role = Role::from_record(&record.role, record.boundary.as_deref())
        .ok_or_else(|| AppError::Internal(format!("token {} has a bad role", record.id)))?;
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

/// Proof that a caller sees an existing boundary: made only by [`crate::App::open`], and
/// taken by every use case on a boundary's contents, so none can run unchecked.
#[derive(Clone, Debug)]
pub struct Access {
    caller: Caller,
    boundary: String,
}

impl Access {
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    pub fn boundary(&self) -> &str {
        &self.boundary
    }
}

impl crate::App {
    /// Opens `boundary` for `caller`: 404 unless the caller sees it and it exists.
    pub async fn open(&self, caller: &Caller, boundary: &str) -> Result<Access, AppError> {
        self.visible_boundary(caller, boundary).await?;
        Ok(Access {
            caller: caller.clone(),
            boundary: boundary.to_owned(),
        })
    }

    /// [`crate::App::open`] on a path bounded by `deadline` (SPEC 2.4): past it, or with the
    /// store unreachable, the answer is `PolicyUnavailable` on a plan path and `Unavailable`
    /// elsewhere.
    pub async fn open_by(
        &self,
        caller: &Caller,
        boundary: &str,
        deadline: tokio::time::Instant,
        plan_path: bool,
    ) -> Result<Access, AppError> {
        let late = "the boundary lookup did not answer in time".to_owned();
        let opened = match tokio::time::timeout_at(deadline, self.open(caller, boundary)).await {
            Ok(result) => result,
            Err(_) => Err(AppError::Unavailable(late)),
        };
        match opened {
            Err(AppError::Unavailable(cause)) if plan_path => {
                Err(AppError::PolicyUnavailable(cause))
            }
            other => other,
        }
    }
}
