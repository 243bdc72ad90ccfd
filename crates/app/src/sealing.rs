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

/// Why a key is not the store's key ([`confirm_key`]).
#[derive(Debug, thiserror::Error)]
pub enum KeyCheckError {
    /// The store records another key's check value.
    #[error("the store's values were sealed with another key")]
    NotTheStoresKey,
    /// The key opens fewer of the stored cluster credentials than it cannot open.
    #[error("the key opens {opened} of the {stored} stored cluster credentials")]
    OpensTooFew { opened: usize, stored: usize },
    #[error("cannot read or record the key's check value")]
    Store(#[source] palisade_store::StoreError),
}

impl SealingKey {
    /// A value that tells keys apart without revealing them: SHA-256 of a key derived for
    /// this purpose alone, in hex.
    pub fn check_value(&self) -> String {
        use sha2::Digest;
        let derived = self.derive("palisade encryption key check");
        hex::encode(sha2::Sha256::digest(derived.0))
    }
}

/// Confirms that `key` is the key of `store`: every replica must seal and open with one key,
/// or what one seals (cluster credentials, sessions) the others cannot open. The first start
/// records the key's check value in the store; every later start compares. A key that opens
/// fewer of the stored cluster credentials than it cannot open is refused before anything is
/// recorded, so a store made before check values were recorded gets the value of the first
/// start whose key opens most of its credentials. Answers the names of the clusters whose
/// credentials the key does not open (to be given again).
pub async fn confirm_key(
    store: &dyn palisade_store::Store,
    key: &SealingKey,
) -> Result<Vec<String>, KeyCheckError> {
    let check = key.check_value();
    let recorded = store
        .encryption_key_check(None)
        .await
        .map_err(KeyCheckError::Store)?;
    let clusters = store.list_clusters().await.map_err(KeyCheckError::Store)?;
    let unopened: Vec<String> = clusters
        .iter()
        .filter(|cluster| key.open(&cluster.kubeconfig_sealed).is_err())
        .map(|cluster| cluster.name.clone())
        .collect();
    let recorded = match recorded {
        Some(recorded) => recorded,
        None => {
            let opened = clusters.len() - unopened.len();
            if opened < unopened.len() {
                return Err(KeyCheckError::OpensTooFew {
                    opened,
                    stored: clusters.len(),
                });
            }
            // Another replica starting at the same moment may record its key first.
            store
                .encryption_key_check(Some(&check))
                .await
                .map_err(KeyCheckError::Store)?
                .unwrap_or_default()
        }
    };
    if recorded != check {
        return Err(KeyCheckError::NotTheStoresKey);
    }
    Ok(unopened)
}

/// Makes `key` the key of `store` from now on, whatever key it recorded (rotation: the
/// credentials sealed with the old key must be given again). Answers the names of the clusters
/// whose credentials the key does not open.
pub async fn replace_key(
    store: &dyn palisade_store::Store,
    key: &SealingKey,
) -> Result<Vec<String>, KeyCheckError> {
    store
        .replace_encryption_key_check(&key.check_value())
        .await
        .map_err(KeyCheckError::Store)?;
    let clusters = store.list_clusters().await.map_err(KeyCheckError::Store)?;
    Ok(clusters
        .iter()
        .filter(|cluster| key.open(&cluster.kubeconfig_sealed).is_err())
        .map(|cluster| cluster.name.clone())
        .collect())
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

    async fn store_in(dir: &std::path::Path) -> palisade_store::SharedStore {
        let url = format!("sqlite://{}", dir.join("palisade.db").display());
        palisade_store::connect(&url).await.unwrap()
    }

    /// The first start records its key; another key is refused from then on.
    #[tokio::test]
    async fn a_store_keeps_the_key_it_was_first_started_with() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path()).await;
        let (first, other) = (SealingKey::random(), SealingKey::random());
        assert!(confirm_key(store.as_ref(), &first)
            .await
            .unwrap()
            .is_empty());
        assert!(confirm_key(store.as_ref(), &first)
            .await
            .unwrap()
            .is_empty());
        assert!(matches!(
            confirm_key(store.as_ref(), &other).await,
            Err(KeyCheckError::NotTheStoresKey)
        ));
        assert_ne!(first.check_value(), other.check_value());
        assert_eq!(first.check_value(), first.clone().check_value());
    }

    /// A store made before check values were recorded: the key that opens its credentials
    /// is recorded; one that opens none of them is refused and records nothing.
    #[tokio::test]
    async fn an_older_store_takes_the_key_its_credentials_open_with() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path()).await;
        let (right, wrong, stray) = (
            SealingKey::random(),
            SealingKey::random(),
            SealingKey::random(),
        );
        for (name, key) in [("c1", &right), ("c2", &right), ("c3", &stray)] {
            store
                .put_cluster(name, &key.seal(b"kubeconfig").unwrap(), None)
                .await
                .unwrap();
        }
        for (key, opened) in [(&wrong, 0), (&stray, 1)] {
            match confirm_key(store.as_ref(), key).await {
                Err(KeyCheckError::OpensTooFew {
                    opened: o,
                    stored: 3,
                }) if o == opened => {}
                other => panic!("{opened} of 3 is refused: {other:?}"),
            }
        }
        // Nothing was recorded: the right key is, and the stray one is refused from then on.
        assert_eq!(confirm_key(store.as_ref(), &right).await.unwrap(), ["c3"]);
        store.delete_cluster("c1").await.unwrap();
        store.delete_cluster("c2").await.unwrap();
        assert!(matches!(
            confirm_key(store.as_ref(), &stray).await,
            Err(KeyCheckError::NotTheStoresKey)
        ));
        // The recorded key starts even where it opens none of the credentials left.
        assert_eq!(confirm_key(store.as_ref(), &right).await.unwrap(), ["c3"]);
        // Replaced on purpose (rotation): the new key starts, the old one no longer.
        assert_eq!(replace_key(store.as_ref(), &wrong).await.unwrap(), ["c3"]);
        assert_eq!(confirm_key(store.as_ref(), &wrong).await.unwrap(), ["c3"]);
        assert!(matches!(
            confirm_key(store.as_ref(), &right).await,
            Err(KeyCheckError::NotTheStoresKey)
        ));
    }
}

#[cfg(test)]
mod key_file_tests {
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
