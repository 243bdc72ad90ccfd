//! Which store a `--database` value names: `sqlite:` URLs and plain paths open SQLite,
//! `postgres://` and `postgresql://` PostgreSQL; any other scheme is refused before anything
//! is opened or created, with a message that holds no credentials.

use palisade_store::{backend_of, Backend, StoreError};

#[test]
fn accepted_forms() {
    let table = [
        ("sqlite://./data/palisade.db", Backend::Sqlite),
        ("sqlite:palisade.db", Backend::Sqlite),
        ("sqlite::memory:", Backend::Sqlite),
        ("SQLite://x.db", Backend::Sqlite),
        ("palisade.db", Backend::Sqlite),
        ("./data/palisade.db", Backend::Sqlite),
        ("/var/lib/palisade/palisade.db", Backend::Sqlite),
        ("./odd:name.db", Backend::Sqlite),
        ("C:palisade.db", Backend::Sqlite),
        (
            "postgres://user:secret@db.example/palisade",
            Backend::Postgres,
        ),
        (
            "postgresql://user@db.example:5432/palisade",
            Backend::Postgres,
        ),
        ("POSTGRES://db.example/palisade", Backend::Postgres),
    ];
    for (url, backend) in table {
        assert_eq!(backend_of(url).unwrap(), backend, "{url}");
    }
}

#[test]
fn refused_forms_name_the_scheme_and_never_the_password() {
    let table = [
        ("postgress://user:secret@host/db", "postgress"),
        ("postgre://user:secret@host/db", "postgre"),
        ("mysql://user:secret@host/db", "mysql"),
        ("mysql://x", "mysql"),
        ("mysql:x", "mysql"),
        ("mariadb://user:secret@host", "mariadb"),
        ("http://user:secret@host/db", "http"),
        ("file:palisade.db", "file"),
        ("postgres:user:secret@host/db", "postgres"),
        ("redis+sentinel://:secret@host", "redis+sentinel"),
    ];
    for (url, scheme) in table {
        let error = backend_of(url).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, StoreError::UnsupportedUrl(_)),
            "{url}: {error:?}"
        );
        assert!(message.contains(&format!("'{scheme}")), "{url}: {message}");
        assert!(!message.contains("secret"), "{url}: {message}");
        assert!(!message.contains("user"), "{url}: {message}");
        assert!(message.contains("postgres://"), "{url}: {message}");
        let debug = format!("{error:?}");
        assert!(!debug.contains("secret"), "{url}: {debug}");
    }
}

#[tokio::test]
async fn connect_refuses_an_unknown_scheme_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::env::current_dir().unwrap();
    // Relative to the test's directory, so that a store opened by mistake lands there.
    std::env::set_current_dir(dir.path()).unwrap();
    let result = palisade_store::connect("postgress://user:secret@host/db").await;
    std::env::set_current_dir(cwd).unwrap();
    let error = result.unwrap_err();
    assert!(!error.to_string().contains("secret"), "{error}");
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "files were created: {left:?}");
}
