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

/// Ends the portal session `id` (signed out): it is refused from now on, until
/// `expires_at`, when it would have expired anyway.
pub async fn end_session(
    state: &App,
    id: &str,
    expires_at: std::time::SystemTime,
) -> Result<(), AppError> {
    state
        .store
        .end_session(id, &palisade_store::timestamp(expires_at))
        .await
        .map_err(|e| AppError::from_store(e, "session"))
}

/// Whether the portal session `id` was ended ([`end_session`]).
pub async fn session_ended(state: &App, id: &str) -> Result<bool, AppError> {
    state
        .store
        .session_ended(id)
        .await
        .map_err(|e| AppError::from_store(e, "session"))
}

/// On first start with an empty store, makes an admin token and writes it to
/// `<data_dir>/admin.token` (mode 0600). Returns the path when a token was made.
pub async fn bootstrap_admin(
    store: &dyn palisade_store::Store,
    data_dir: &Path,
) -> Result<Option<std::path::PathBuf>, BootstrapError> {
    let (id, token) = new_token_secret();
    if !store
        .bootstrap_admin_token(admin_record(id, &token))
        .await?
    {
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

fn admin_record(id: String, token: &str) -> TokenRecord {
    TokenRecord {
        id,
        secret_sha256: hash_secret(token),
        role: "admin".into(),
        boundary: None,
        created_at: palisade_store::now(),
        expires_at: None,
        created_by: "bootstrap".into(),
    }
}

/// The shortest admin token palisade takes from its operator (32 characters: 192 bits when
/// they are base64 of random bytes).
pub const GIVEN_TOKEN_MIN_LEN: usize = 32;

/// Checks a token an operator gives palisade (`PALISADE_ADMIN_TOKEN`): at least
/// [`GIVEN_TOKEN_MIN_LEN`] printable ASCII characters, no white space. Its id (as
/// `palisade get tokens` lists it) is the first 16 hex digits of its SHA-256.
pub fn given_token(text: &str) -> Result<(String, String), String> {
    let token = text.trim_end_matches(['\n', '\r']);
    if token.len() < GIVEN_TOKEN_MIN_LEN {
        return Err(format!(
            "must be at least {GIVEN_TOKEN_MIN_LEN} characters (e.g. head -c 32 /dev/urandom | base64), got {}",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces".to_owned());
    }
    let id = hash_secret(token)[..16].to_owned();
    Ok((id, token.to_owned()))
}

/// As [`bootstrap_admin`], with the admin token given by the operator (checked by
/// [`given_token`]) instead of made and written to a file: for deployments where nobody can
/// read a file in the data directory (a container without a shell). `true` when the store was
/// empty and the token is now its admin token; an existing store keeps its tokens.
pub async fn bootstrap_given_admin(
    store: &dyn palisade_store::Store,
    id: String,
    token: &str,
) -> Result<bool, BootstrapError> {
    Ok(store.bootstrap_admin_token(admin_record(id, token)).await?)
}

/// Writes a file readable by its owner only (mode 0600), replacing it atomically.
/// Creates `path` (mode 0600) holding `contents`, whole, unless it exists
/// (`ErrorKind::AlreadyExists`): written to a temporary file of this call's own, then linked
/// to `path`, which fails when another writer made it first. The file never exists half
/// written, and an existing one is never replaced.
pub fn create_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = private_tmp(path);
    write_file(&tmp, contents)?;
    let linked = std::fs::hard_link(&tmp, path);
    let removed = std::fs::remove_file(&tmp);
    linked?;
    removed
}

fn write_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options.open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Writes `path` (mode 0600) whole: a temporary file of this call's own, then renamed over it.
pub fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = private_tmp(path);
    write_file(&tmp, contents)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// A temporary name beside `path`, unique to this call (several processes may write at once).
fn private_tmp(path: &Path) -> std::path::PathBuf {
    use rand::RngCore;
    let mut unique = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut unique);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", hex::encode(unique)))
}

#[cfg(test)]
mod given_token_tests {
    use super::given_token;

    #[test]
    fn a_given_token_is_long_printable_and_has_a_stable_id() {
        let (id, token) = given_token("c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=\n").unwrap();
        assert_eq!(token, "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=");
        assert_eq!(id.len(), 16);
        assert_eq!(given_token(&token).unwrap().0, id);
        assert_eq!(
            given_token("short").unwrap_err(),
            "must be at least 32 characters (e.g. head -c 32 /dev/urandom | base64), got 5"
        );
        assert_eq!(
            given_token("with a space in the middle of it all!").unwrap_err(),
            "must be printable ASCII without spaces"
        );
    }
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
