//! `palisade token revoke` of the last admin token: refused with the API's 409 and what to do
//! first, exit 1; the token keeps working.

use crate::common::{palisade_with_stdin, serve, text};

#[test]
fn the_last_admin_token_is_not_revoked() {
    let server = serve(&["--no-reconciler"]);
    let listed = palisade_with_stdin(&server, &["get", "tokens", "-o", "json"], "");
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let id = listed["items"][0]["id"].as_str().unwrap().to_owned();
    let out = palisade_with_stdin(&server, &["token", "revoke", &id], "");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: token '{id}' is the last admin token: create another admin token first [conflict]\n"
        )
    );
    let again = palisade_with_stdin(&server, &["get", "tokens"], "");
    assert!(again.status.success(), "{}", text(&again.stderr));
}
