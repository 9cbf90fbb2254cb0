//! Rendering replies for clients: the final JSON-RPC message with the client's id spliced in
//! front of the raw payload, as one `application/json` response (a body of several frames: the
//! relayed payload is one of them, never copied) or as an SSE stream (one event per message,
//! `X-Accel-Buffering: no`). Upstream error objects are relayed verbatim, except that
//! release-candidate error codes are renumbered to the final ones (never emitted as is).

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use mcpgate_protocol::errors::{self, RpcError};
use mcpgate_protocol::json::{Json, Rope};
use mcpgate_protocol::jsonrpc;
use mcpgate_protocol::rawobj::RawObject;
use mcpgate_protocol::reply::{Event, EventStream, Outcome, Reply};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

pub type Body = BoxBody<Bytes, Infallible>;

pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

/// A body whose frames are a rope's pieces, with its exact length known (`Content-Length`).
struct RopeBody {
    pieces: VecDeque<Bytes>,
    left: u64,
}

impl http_body::Body for RopeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = self.pieces.pop_front();
        if let Some(p) = &next {
            self.left -= p.len() as u64;
        }
        Poll::Ready(next.map(|p| Ok(Frame::data(p))))
    }

    fn is_end_stream(&self) -> bool {
        self.pieces.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.left)
    }
}

pub fn rope_body(rope: Rope) -> Body {
    let left = rope.len() as u64;
    RopeBody { pieces: rope.into_pieces().into(), left }.boxed()
}

pub fn json(status: StatusCode, body: impl Into<Rope>) -> Response<Body> {
    let mut r = Response::new(rope_body(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

pub fn error(id: Option<&Json>, e: &RpcError) -> Response<Body> {
    with_headers(json(e.status, jsonrpc::error_message(id, e)), e)
}

fn with_headers(mut r: Response<Body>, e: &RpcError) -> Response<Body> {
    for (name, value) in &e.headers {
        if let Ok(v) = http::HeaderValue::from_str(value) {
            r.headers_mut().insert(*name, v);
        }
    }
    r
}

pub fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(full(text));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

/// The final message for `id`, with the HTTP status it travels with.
pub fn outcome_message(id: &Json, outcome: &Outcome) -> (StatusCode, Rope) {
    match outcome {
        Outcome::Result(raw) => (StatusCode::OK, jsonrpc::result_message(id, raw)),
        Outcome::Error(e) => (e.status, jsonrpc::error_message(Some(id), e).into()),
        Outcome::UpstreamError(raw) => {
            let (code, fixed) = normalise_upstream_error(raw);
            let status = errors::status_for(code);
            (status, jsonrpc::error_message_raw(Some(id), fixed.as_ref().unwrap_or(raw)))
        }
    }
}

/// Reads an upstream error's code; rewrites release-candidate codes to the final numbers.
fn normalise_upstream_error(raw: &Json) -> (i64, Option<Json>) {
    let Ok(mut obj) = RawObject::from_json(raw) else {
        return (errors::INTERNAL_ERROR, None);
    };
    let code = obj.parse::<i64>("code").and_then(Result::ok).unwrap_or(errors::INTERNAL_ERROR);
    let modern = errors::modernise_rc_code(code);
    if modern == code {
        return (code, None);
    }
    let fixed = obj.set_json("code", &modern).ok().map(|_| obj.to_json());
    (modern, fixed)
}

/// One SSE event carrying `msg` (on one `data:` line), as frames.
pub fn sse_event(msg: impl Into<Rope>) -> Vec<Frame<Bytes>> {
    let mut out = Vec::with_capacity(5);
    out.push(Frame::data(Bytes::from_static(b"event: message\ndata: ")));
    out.extend(msg.into().one_line().into_pieces().into_iter().map(Frame::data));
    out.push(Frame::data(Bytes::from_static(b"\n\n")));
    out
}

/// One SSE event carrying a message the gateway made (small), in one buffer.
pub fn sse_bytes(msg: Vec<u8>) -> Bytes {
    let mut out = Vec::with_capacity(msg.len() + 24);
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend(msg.into_iter().map(|b| if b == b'\n' || b == b'\r' { b' ' } else { b }));
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

pub fn reply(id: Json, reply: Reply) -> Response<Body> {
    match reply {
        Reply::Single(o) => {
            let (status, bytes) = outcome_message(&id, &o);
            match &o {
                Outcome::Error(e) => with_headers(json(status, bytes), e),
                _ => json(status, bytes),
            }
        }
        // A stream may last long: its id must not keep the request's buffer alive.
        Reply::Stream(s) => sse(id.detached(), s),
    }
}

/// How often an SSE stream that has nothing to say sends a comment, so that proxies and clients
/// keep it open.
pub const KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);

fn sse(id: Json, stream: EventStream) -> Response<Body> {
    use futures_util::StreamExt;
    let events = futures_util::stream::unfold(Some((stream, id)), |state| async move {
        let (mut stream, id) = state?;
        let next = tokio::select! {
            ev = stream.next() => ev,
            _ = tokio::time::sleep(KEEPALIVE) => {
                return Some((vec![Frame::data(Bytes::from_static(b": keepalive\n\n"))], Some((stream, id))));
            }
        };
        match next {
            Some(Event::Notification(n)) => Some((sse_event(n), Some((stream, id)))),
            Some(Event::Done(o)) => Some((sse_event(outcome_message(&id, &o).1), None)),
            // Never yielded to a client's stream (see `EventStream::with_asks`).
            Some(Event::Ask(_)) => Some((Vec::new(), Some((stream, id)))),
            None => None,
        }
    });
    let frames = events.flat_map(|frames| futures_util::stream::iter(frames.into_iter().map(Ok::<_, Infallible>)));
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(frames)));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, http::HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, http::HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc_codes_are_renumbered_when_relayed() {
        let id = Json::from_string("7".into()).unwrap();
        let raw = Json::from_string(r#"{"code":-32001,"message":"m"}"#.into()).unwrap();
        let (status, bytes) = outcome_message(&id, &Outcome::UpstreamError(raw));
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(String::from_utf8(bytes.into_vec()).unwrap(), r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32020,"message":"m"}}"#);
        let raw = Json::from_string(r#"{"code":-32602,"message":"Unknown tool"}"#.into()).unwrap();
        let (status, bytes) = outcome_message(&id, &Outcome::UpstreamError(raw));
        assert_eq!(status, StatusCode::OK);
        assert!(String::from_utf8(bytes.into_vec()).unwrap().contains("-32602"));
    }

    #[test]
    fn sse_events_are_single_line() {
        let ev: Vec<u8> = sse_event(b"{\n  \"a\": 1\r\n}".to_vec()).into_iter().filter_map(|f| f.into_data().ok()).flatten().collect();
        assert_eq!(&ev[..], b"event: message\ndata: {   \"a\": 1  }\n\n");
    }

    #[tokio::test]
    async fn a_relayed_result_is_a_frame_of_the_body_not_a_copy() {
        let msg = mcpgate_protocol::jsonrpc::Message::parse_bytes(&Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"big":"x"}}"#))
            .unwrap();
        let result = msg.result.unwrap();
        let mut body = reply(msg.id.unwrap(), Reply::Single(Outcome::Result(result.clone()))).into_body();
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(45));
        let mut frames = Vec::new();
        while let Some(Ok(f)) = body.frame().await {
            frames.push(f.into_data().unwrap());
        }
        assert!(frames.iter().any(|f| f.as_ptr() == result.as_bytes().as_ptr()), "the payload frame points into the upstream's buffer");
        assert_eq!(frames.concat(), br#"{"jsonrpc":"2.0","id":1,"result":{"big":"x"}}"#.to_vec());
    }
}
