//! Cluster credentials: the kubeconfig rules of SPEC 4.1 (one cluster, user and context, an
//! https server, inline credentials only) and their encryption at rest (ChaCha20-Poly1305,
//! a random nonce per value, the key kept outside the store).

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;
use serde_yaml_ng::Value;

use crate::error::ApiError;

/// The key that seals kubeconfigs. Read from `PALISADE_ENCRYPTION_KEY` (base64 of 32 bytes)
/// or `<data-dir>/encryption.key`, made at first start.
#[derive(Clone)]
pub struct SealingKey([u8; 32]);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(..)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SealingError {
    #[error("the encryption key must be base64 of exactly 32 bytes")]
    BadKey,
    #[error("could not read or write the key file {path}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("a sealed value could not be opened (wrong key or damaged data)")]
    Open,
}

impl SealingKey {
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        SealingKey(key)
    }

    pub fn from_base64(text: &str) -> Result<Self, SealingError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text.trim())
            .map_err(|_| SealingError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| SealingError::BadKey)?;
        Ok(SealingKey(key))
    }

    /// The key from the environment, else from `<dir>/encryption.key`, made when absent.
    pub fn load_or_create(dir: &std::path::Path) -> Result<Self, SealingError> {
        if let Ok(text) = std::env::var("PALISADE_ENCRYPTION_KEY") {
            return Self::from_base64(&text);
        }
        let path = dir.join("encryption.key");
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::from_base64(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::random();
                let text = base64::engine::general_purpose::STANDARD.encode(key.0);
                crate::auth::write_private(&path, format!("{text}\n").as_bytes())
                    .map_err(|source| SealingError::Io { path, source })?;
                Ok(key)
            }
            Err(source) => Err(SealingError::Io { path, source }),
        }
    }

    /// nonce (12 bytes) || ciphertext.
    pub fn seal(&self, plain: &[u8]) -> Vec<u8> {
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.0));
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let mut out = nonce.to_vec();
        // Encryption with a valid key and nonce cannot fail for in-memory buffers.
        out.extend(
            cipher
                .encrypt(Nonce::from_slice(&nonce), plain)
                .unwrap_or_default(),
        );
        out
    }

    pub fn open(&self, sealed: &[u8]) -> Result<Vec<u8>, SealingError> {
        if sealed.len() < 12 {
            return Err(SealingError::Open);
        }
        let (nonce, data) = sealed.split_at(12);
        ChaCha20Poly1305::new(Key::from_slice(&self.0))
            .decrypt(Nonce::from_slice(nonce), data)
            .map_err(|_| SealingError::Open)
    }
}

fn bad(pointer: &str, message: &str) -> ApiError {
    ApiError::invalid(&format!("/kubeconfig{pointer}"), message)
}

fn single<'v>(config: &'v Value, list: &str) -> Result<&'v Value, ApiError> {
    match config.get(list).and_then(Value::as_sequence) {
        Some(items) if items.len() == 1 => Ok(&items[0]),
        Some(items) => Err(bad(
            &format!("/{list}"),
            &format!("must hold exactly one entry, found {}", items.len()),
        )),
        None => Err(bad(&format!("/{list}"), "is required")),
    }
}

/// Checks a kubeconfig against SPEC 4.1; errors name the field under `/kubeconfig`.
pub fn validate_kubeconfig(text: &str) -> Result<(), ApiError> {
    let config: Value =
        serde_yaml_ng::from_str(text).map_err(|e| bad("", &format!("is not valid YAML: {e}")))?;
    if !config.is_mapping() {
        return Err(bad("", "must be a kubeconfig mapping"));
    }
    let cluster = single(&config, "clusters")?;
    let user = single(&config, "users")?;
    single(&config, "contexts")?;
    let cluster = cluster
        .get("cluster")
        .ok_or_else(|| bad("/clusters/0/cluster", "is required"))?;
    let server = cluster
        .get("server")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("/clusters/0/cluster/server", "is required"))?;
    if !server.starts_with("https://") {
        return Err(bad("/clusters/0/cluster/server", "must be an https:// URL"));
    }
    for forbidden in [
        "certificate-authority",
        "proxy-url",
        "insecure-skip-tls-verify",
    ] {
        if cluster.get(forbidden).is_some() {
            let why = match forbidden {
                "certificate-authority" => {
                    "file paths are not accepted; use certificate-authority-data"
                }
                "proxy-url" => "proxies are not supported",
                _ => "TLS verification cannot be turned off",
            };
            return Err(bad(&format!("/clusters/0/cluster/{forbidden}"), why));
        }
    }
    let user = user
        .get("user")
        .ok_or_else(|| bad("/users/0/user", "is required"))?;
    for forbidden in [
        "exec",
        "auth-provider",
        "client-certificate",
        "client-key",
        "tokenFile",
        "username",
        "password",
    ] {
        if user.get(forbidden).is_some() {
            let why = match forbidden {
                "exec" | "auth-provider" => {
                    "credential plugins are not accepted; use inline credentials"
                }
                "username" | "password" => "basic authentication is not accepted",
                _ => "file paths are not accepted; use inline credentials",
            };
            return Err(bad(&format!("/users/0/user/{forbidden}"), why));
        }
    }
    let has_cert = user.get("client-certificate-data").is_some();
    let has_key = user.get("client-key-data").is_some();
    let has_token = user.get("token").is_some();
    if has_cert != has_key {
        return Err(bad(
            "/users/0/user",
            "client-certificate-data and client-key-data go together",
        ));
    }
    if !has_cert && !has_token {
        return Err(bad(
            "/users/0/user",
            "needs inline credentials: client-certificate-data with client-key-data, or token",
        ));
    }
    Ok(())
}
