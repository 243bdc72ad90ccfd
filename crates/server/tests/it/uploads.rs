//! Uploads are bounded (SPEC 5, v3.1; issues 30 and 31), through the API on SQLite and on
//! PostgreSQL: a boundary stores at most `serve --max-upload-bytes` of uploads (413 naming the
//! limit and the boundary's use), an upload no resource names is deleted 24 hours after it was
//! made or last named (the sweep is run with a clock of the test's choosing), and what is
//! received at once is bounded per boundary (429) and per process (503), both with
//! `Retry-After`. Content streams in and out whole and unchanged.

use std::time::{Duration, SystemTime};

use crate::common::{Answer, TestApp};
use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use palisade_app::uploads::{Swept, UploadLimits};
use serde_json::{json, Value};
use tower::ServiceExt;

const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// `app`'s API with other upload bounds.
fn router_with(app: &TestApp, limits: UploadLimits) -> Router {
    palisade_server::app(palisade_server::AppState::of(
        app.state.app.clone().with_upload_limits(limits),
    ))
}

/// POSTs `content` as an upload to `boundary`, with `Content-Length` or (`declared` false)
/// streamed without one.
async fn post(
    router: &Router,
    boundary: &str,
    token: &str,
    content: Vec<u8>,
    declared: bool,
) -> Answer {
    let mut request = Request::post(format!("/v1/boundaries/{boundary}/uploads"))
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/octet-stream");
    let body = if declared {
        request = request.header("content-length", content.len());
        Body::from(content)
    } else {
        // In pieces of 100 KiB, as a client sending chunked would.
        let pieces: Vec<Result<Bytes, std::io::Error>> = content
            .chunks(100 * 1024)
            .map(|piece| Ok(Bytes::copy_from_slice(piece)))
            .collect();
        Body::from_stream(futures::stream::iter(pieces))
    };
    answer(router, request.body(body).unwrap()).await
}

async fn answer(router: &Router, request: Request<Body>) -> Answer {
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Answer {
        status,
        headers,
        body,
    }
}

/// The content of upload `id`, fetched as its build Job does: status, ETag, bytes.
async fn fetch(app: &TestApp, boundary: &str, id: &str) -> (StatusCode, String, Vec<u8>) {
    let token = app.state.fetch_token(boundary, id).unwrap();
    let request = Request::get(format!("/v1/boundaries/{boundary}/uploads/{id}/content"))
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let etag = response
        .headers()
        .get("etag")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, etag, bytes.to_vec())
}

fn bytes(size: usize, seed: u8) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn sha256(content: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(content))
}

async fn stored_over_the_limit_is_413_naming_it(app: TestApp) {
    app.boundary("shop").await;
    app.boundary("web").await;
    let developer = app.token("developer", Some("shop")).await;
    let router = router_with(
        &app,
        UploadLimits {
            stored_per_boundary: 20_000,
            ..UploadLimits::default()
        },
    );
    let first = post(&router, "shop", &developer, bytes(12_000, 1), true).await;
    assert_eq!(first.status, StatusCode::CREATED, "{:?}", first.body);
    assert_eq!(first.body["size"], 12_000);

    // Refused before the body is read (its Content-Length), and after it was (no length).
    for declared in [true, false] {
        let over = post(&router, "shop", &developer, bytes(12_000, 2), declared).await;
        over.assert_refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "boundary 'shop' stores 12000 of 20000 bytes of uploads (serve --max-upload-bytes); \
             this upload of 12000 bytes would exceed it",
        );
    }
    // What is left fits; a small upload counts 4 KiB.
    let rest = post(&router, "shop", &developer, bytes(8_000, 3), false).await;
    assert_eq!(rest.status, StatusCode::CREATED, "{:?}", rest.body);
    let small = post(&router, "shop", &developer, bytes(10, 4), true).await;
    small.assert_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "boundary 'shop' stores 20000 of 20000 bytes of uploads (serve --max-upload-bytes); \
         this upload of 10 bytes, counted as 4096, would exceed it",
    );
    // Another boundary has a limit of its own.
    let web = post(&router, "web", &app.admin, bytes(12_000, 5), false).await;
    assert_eq!(web.status, StatusCode::CREATED, "{:?}", web.body);
    // The default limit is 1 GiB.
    assert_eq!(
        app.state.upload_limits().stored_per_boundary,
        1024 * 1024 * 1024
    );
}

async fn content_streams_whole_and_sizes_are_bounded(app: TestApp) {
    app.boundary("shop").await;
    let developer = app.token("developer", Some("shop")).await;
    // Several chunks and a part of one, streamed in pieces that do not fall on chunk bounds.
    let content = bytes(3 * 256 * 1024 + 12_345, 7);
    for declared in [true, false] {
        let stored = post(&app.router, "shop", &developer, content.clone(), declared).await;
        assert_eq!(stored.status, StatusCode::CREATED, "{:?}", stored.body);
        assert_eq!(stored.body["size"], content.len());
        assert_eq!(stored.body["sha256"], sha256(&content));
        let id = stored.body["id"].as_str().unwrap();
        let (status, etag, fetched) = fetch(&app, "shop", id).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(etag, format!("\"{}\"", sha256(&content)));
        assert!(fetched == content, "the content comes back unchanged");
    }
    let max = palisade_app::uploads::MAX_UPLOAD_BYTES;
    for declared in [true, false] {
        let over = post(&app.router, "shop", &developer, vec![1; max + 1], declared).await;
        over.assert_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "an upload may be at most 8388608 bytes (8 MiB)",
        );
        let empty = post(&app.router, "shop", &developer, Vec::new(), declared).await;
        empty.assert_error(StatusCode::BAD_REQUEST, "the upload is empty");
    }
    let exact = post(&app.router, "shop", &developer, vec![2; max], false).await;
    assert_eq!(exact.status, StatusCode::CREATED, "{:?}", exact.body);
}

async fn unnamed_uploads_are_swept_after_a_day_and_named_ones_stay(app: TestApp) {
    app.boundary("shop").await;
    let developer = app.token("developer", Some("shop")).await;
    let upload = |seed| {
        let (app, developer) = (&app, &developer);
        async move {
            let answer = post(&app.router, "shop", developer, bytes(300_000, seed), true).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
            answer.body["id"].as_str().unwrap().to_owned()
        }
    };
    let (unused, named) = (upload(1).await, upload(2).await);
    let wanted = json!({"type": "function", "name": "hook", "plan": "small", "upload": named});
    let created = app.create("shop", &developer, wanted).await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);

    let now = SystemTime::now();
    // Within the day: nothing goes.
    let swept = app.state.sweep_uploads(now + DAY / 2).await.unwrap();
    assert_eq!(swept, Swept::default());
    assert_eq!(fetch(&app, "shop", &unused).await.0, StatusCode::OK);

    // A day later: the unused one goes, content and all; the named one stays.
    let swept = app.state.sweep_uploads(now + DAY + DAY / 24).await.unwrap();
    assert_eq!(
        swept,
        Swept {
            uploads: 1,
            chunks: 2
        }
    );
    assert_eq!(
        fetch(&app, "shop", &unused).await.0,
        StatusCode::UNAUTHORIZED
    );
    let (status, _, content) = fetch(&app, "shop", &named).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content, bytes(300_000, 2));
    let wanted = json!({"type": "function", "name": "again", "plan": "small", "upload": unused});
    let renamed = app.create("shop", &developer, wanted).await;
    renamed.assert_error(
        StatusCode::BAD_REQUEST,
        format!("/upload: no upload '{unused}' in boundary 'shop'"),
    );

    // Still named however long it stays: the sweep keeps it.
    let swept = app.state.sweep_uploads(now + 30 * DAY).await.unwrap();
    assert_eq!(swept, Swept::default());
    // Once its resource names another upload, it goes a day after it was last named.
    let other = upload(3).await;
    let patched = app
        .patch(
            "/v1/boundaries/shop/resources/function/hook",
            &developer,
            json!({"upload": other}),
        )
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{:?}", patched.body);
    let swept = app.state.sweep_uploads(now + DAY / 2).await.unwrap();
    assert_eq!(swept, Swept::default(), "named less than a day ago");
    let swept = app.state.sweep_uploads(now + DAY + DAY / 24).await.unwrap();
    assert_eq!(swept.uploads, 1);
    assert_eq!(
        fetch(&app, "shop", &named).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(fetch(&app, "shop", &other).await.0, StatusCode::OK);
}

/// A body that sends `first` and then waits until `rest` is sent (or dropped).
fn held_body(first: Vec<u8>) -> (Body, futures::channel::mpsc::UnboundedSender<Bytes>) {
    let (send, receive) = futures::channel::mpsc::unbounded::<Bytes>();
    send.unbounded_send(Bytes::from(first)).unwrap();
    let stream = futures::StreamExt::map(receive, Ok::<_, std::io::Error>);
    (Body::from_stream(stream), send)
}

async fn uploads_under_way_are_bounded(app: TestApp) {
    app.boundary("shop").await;
    app.boundary("web").await;
    let router = router_with(
        &app,
        UploadLimits {
            in_flight: 10 * 1024 * 1024,
            in_flight_per_boundary: 8 * 1024 * 1024,
            ..UploadLimits::default()
        },
    );
    let request = |boundary: &str, body: Body| {
        Request::post(format!("/v1/boundaries/{boundary}/uploads"))
            .header("authorization", format!("Bearer {}", app.admin))
            .body(body)
            .unwrap()
    };
    // An upload under way, without a Content-Length: it holds 8 MiB.
    let (body, rest) = held_body(vec![1; 1000]);
    let under_way = tokio::spawn({
        let (router, request) = (router.clone(), request("shop", body));
        async move { answer(&router, request).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The same boundary is over its own bound; another is over the process's.
    let refused = [
        (
            "shop",
            vec![2; 1000],
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            "boundary 'shop' has 8388608 bytes of uploads under way, and at most 8388608 may be \
             at once; this upload would add 1000 (its Content-Length, or 8 MiB without one); \
             retry after 1 s",
        ),
        (
            "web",
            vec![3; 4 * 1024 * 1024],
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "palisade is receiving 8388608 bytes of uploads, and at most 10485760 at once; this \
             upload would add 4194304; retry after 1 s",
        ),
    ];
    for (boundary, content, status, code, message) in refused {
        let answer = post(&router, boundary, &app.admin, content, true).await;
        answer.assert_refusal(status, code, message);
        assert_eq!(answer.headers["retry-after"], "1");
    }
    let small = post(&router, "web", &app.admin, vec![4; 1000], true).await;
    assert_eq!(small.status, StatusCode::CREATED, "what fits is taken");

    // The upload under way ends; its bytes are free again.
    rest.unbounded_send(Bytes::from(vec![5; 1000])).unwrap();
    drop(rest);
    let ended = under_way.await.unwrap();
    assert_eq!(ended.status, StatusCode::CREATED, "{:?}", ended.body);
    assert_eq!(ended.body["size"], 2000);
    let again = post(&router, "shop", &app.admin, vec![2; 1000], true).await;
    assert_eq!(again.status, StatusCode::CREATED);
    let elsewhere = post(&router, "web", &app.admin, vec![3; 4 * 1024 * 1024], true).await;
    assert_eq!(elsewhere.status, StatusCode::CREATED);
}

/// An upload whose client goes away half-way leaves nothing: not stored, its chunks deleted.
async fn an_upload_cut_short_leaves_nothing(app: TestApp) {
    app.boundary("shop").await;
    let (send, receive) = futures::channel::mpsc::unbounded::<Result<Bytes, std::io::Error>>();
    send.unbounded_send(Ok(Bytes::from(vec![1; 600 * 1024])))
        .unwrap();
    send.unbounded_send(Err(std::io::Error::other("the client went away")))
        .unwrap();
    let request = Request::post("/v1/boundaries/shop/uploads")
        .header("authorization", format!("Bearer {}", app.admin))
        .body(Body::from_stream(receive))
        .unwrap();
    let cut = answer(&app.router, request).await;
    cut.assert_error(
        StatusCode::BAD_REQUEST,
        "the upload could not be read whole: the client stopped sending it",
    );
    // Two chunks had been written; they are gone already, with nothing for the sweeper.
    let swept = app
        .state
        .sweep_uploads(SystemTime::now() + 2 * DAY)
        .await
        .unwrap();
    assert_eq!(swept, Swept::default());
    assert_eq!(app.store.upload_usage("shop").await.unwrap(), 0);
}

macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::TestApp::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::TestApp::postgres().await).await;
                }
            )*
        }
    };
}

on_both_stores!(
    stored_over_the_limit_is_413_naming_it,
    content_streams_whole_and_sizes_are_bounded,
    unnamed_uploads_are_swept_after_a_day_and_named_ones_stay,
    uploads_under_way_are_bounded,
    an_upload_cut_short_leaves_nothing,
);
