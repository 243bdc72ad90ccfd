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

/// How many rounds of merge-key resolution a kubeconfig may need (a merged mapping may
/// itself merge); more is refused.
const MAX_MERGE_DEPTH: usize = 16;

fn has_merge_key(value: &Value) -> bool {
    match value {
        Value::Mapping(map) => map
            .iter()
            .any(|(k, v)| k.as_str() == Some("<<") || has_merge_key(v)),
        Value::Sequence(items) => items.iter().any(has_merge_key),
        Value::Tagged(tagged) => has_merge_key(&tagged.value),
        _ => false,
    }
}

/// The YAML value as JSON, for the rules; tags and non-string keys are refused (a reader
/// that ignores a tag could see another document than one that honours it).
fn to_json(value: &Value, pointer: &str) -> Result<serde_json::Value, ApiError> {
    Ok(match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Number(n) => {
            serde_json::to_value(n).map_err(|_| bad(pointer, "is a number that cannot be read"))?
        }
        Value::String(s) => serde_json::Value::String(s.clone()),
        Value::Sequence(items) => serde_json::Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| to_json(item, &format!("{pointer}/{i}")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Mapping(map) => {
            let mut object = serde_json::Map::new();
            for (key, item) in map {
                let Some(key) = key.as_str() else {
                    return Err(bad(pointer, "has a key that is not a string"));
                };
                let escaped = palisade_api_types::pointer::escape(key);
                object.insert(
                    key.to_owned(),
                    to_json(item, &format!("{pointer}/{escaped}"))?,
                );
            }
            serde_json::Value::Object(object)
        }
        Value::Tagged(_) => return Err(bad(pointer, "YAML tags are not accepted")),
    })
}

/// Checks a kubeconfig against SPEC 4.1 and returns the document to store: the YAML read
/// once, aliases and merge keys (`<<`) resolved, checked, and written out again without
/// anchors, so what was checked is exactly what the reconciler loads. Errors name the field
/// under `/kubeconfig`. The rules are the reconciler's own
/// ([`palisade_reconciler::kubeconfig::check`]), and the stored text passes its loader too.
pub fn validate_kubeconfig(text: &str) -> Result<String, ApiError> {
    let mut config: Value =
        serde_yaml_ng::from_str(text).map_err(|e| bad("", &format!("is not valid YAML: {e}")))?;
    let mut rounds = 0;
    while has_merge_key(&config) {
        if rounds == MAX_MERGE_DEPTH {
            return Err(bad("", "nests merge keys (<<) too deeply"));
        }
        config.apply_merge().map_err(|e| {
            bad(
                "",
                &format!("has a merge key (<<) that cannot be resolved: {e}"),
            )
        })?;
        rounds += 1;
    }
    let json = to_json(&config, "")?;
    palisade_reconciler::kubeconfig::check(&json).map_err(|e| bad(&e.pointer, &e.message))?;
    let canonical = serde_yaml_ng::to_string(&config)
        .map_err(|e| ApiError::Internal(format!("kubeconfig cannot be written out: {e}")))?;
    palisade_reconciler::kubeconfig::read(&canonical).map_err(|e| bad(&e.pointer, &e.message))?;
    Ok(canonical)
}
