//! Cluster credentials: checked by the one set of kubeconfig rules (SPEC 4.1, in
//! `palisade-api-types`) and encrypted at rest (ChaCha20-Poly1305, a random nonce per value,
//! the key kept outside the store).

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;

use crate::error::AppError;

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
    #[error("a value could not be sealed")]
    Seal,
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
                match crate::caller::create_private(&path, format!("{text}\n").as_bytes()) {
                    Ok(()) => Ok(key),
                    // Another process made it first: its key is the installation's.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        let text = std::fs::read_to_string(&path)
                            .map_err(|source| SealingError::Io { path, source })?;
                        Self::from_base64(&text)
                    }
                    Err(source) => Err(SealingError::Io { path, source }),
                }
            }
            Err(source) => Err(SealingError::Io { path, source }),
        }
    }

    /// nonce (12 bytes) || ciphertext. An encryption failure is an error, never a value
    /// that holds the nonce alone.
    pub fn seal(&self, plain: &[u8]) -> Result<Vec<u8>, SealingError> {
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.0));
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = cipher
            .encrypt(Nonce::from_slice(&nonce), plain)
            .map_err(|_| SealingError::Seal)?;
        let mut out = nonce.to_vec();
        out.extend(sealed);
        Ok(out)
    }

    /// A key for another purpose, derived from this one (SHA-256 of the purpose and the
    /// key): what is sealed under one purpose's key never opens under another's.
    pub fn derive(&self, purpose: &str) -> SealingKey {
        use sha2::Digest;
        let mut hash = sha2::Sha256::new();
        hash.update(purpose.as_bytes());
        hash.update([0u8]);
        hash.update(self.0);
        SealingKey(hash.finalize().into())
    }

    /// [`SealingKey::seal`], bound to `context`: the value opens only with the same context
    /// ([`SealingKey::open_for`]). The context is not in the output.
    pub fn seal_for(&self, context: &[u8], plain: &[u8]) -> Result<Vec<u8>, SealingError> {
        let cipher = ChaCha20Poly1305::new(Key::from_slice(&self.0));
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: context,
                },
            )
            .map_err(|_| SealingError::Seal)?;
        let mut out = nonce.to_vec();
        out.extend(sealed);
        Ok(out)
    }

    /// Opens what [`SealingKey::seal_for`] sealed with the same `context`.
    pub fn open_for(&self, context: &[u8], sealed: &[u8]) -> Result<Vec<u8>, SealingError> {
        if sealed.len() < 12 {
            return Err(SealingError::Open);
        }
        let (nonce, data) = sealed.split_at(12);
        ChaCha20Poly1305::new(Key::from_slice(&self.0))
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: data,
                    aad: context,
                },
            )
            .map_err(|_| SealingError::Open)
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

/// Checks a kubeconfig against SPEC 4.1 and returns the document to store (aliases and
/// merge keys resolved, see [`palisade_api_types::kubeconfig::normalise`]); errors name the
/// field under `/kubeconfig`.
pub fn validate_kubeconfig(text: &str) -> Result<String, AppError> {
    palisade_api_types::kubeconfig::normalise(text)
        .map_err(|e| AppError::invalid(&format!("/kubeconfig{}", e.pointer), &e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Several processes starting on one fresh data directory: every one gets the key the
    /// file holds, and none fails (the file is created once, whole, and never replaced).
    #[test]
    fn concurrent_first_starts_share_one_key() {
        for _round in 0..40 {
            let dir = tempfile::tempdir().unwrap();
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
            let starts: Vec<_> = (0..8)
                .map(|_| {
                    let (dir, barrier) = (dir.path().to_owned(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        SealingKey::load_or_create(&dir).map(|k| k.0)
                    })
                })
                .collect();
            let keys: Vec<[u8; 32]> = starts
                .into_iter()
                .map(|t| t.join().unwrap().unwrap())
                .collect();
            let stored = SealingKey::load_or_create(dir.path()).unwrap().0;
            assert!(keys.iter().all(|k| *k == stored));
            let leftovers: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(leftovers, ["encryption.key"]);
        }
    }
}
