//! Serving one client over stdin/stdout (newline-delimited JSON-RPC): stdout carries protocol
//! messages only, one per line, written by a single writer task; requests run concurrently;
//! `notifications/cancelled` aborts the named request (and with it the upstream call). At EOF the
//! in-flight requests are finished before the server returns.

use super::{modern, render};
use crate::dispatch::Service;
use crate::flow::{Event, Reply};
use crate::protocol::errors::RpcError;
use crate::protocol::jsonrpc::{self, Kind, Message};
use futures_util::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_util::codec::{FramedRead, LinesCodec};

const MAX_LINE: usize = 64 * 1024 * 1024;

pub async fn serve(
    svc: Arc<dyn Service>,
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            let mut line = render::one_line(msg);
            line.push(b'\n');
            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                break;
            }
        }
    });
    let inflight: Arc<Mutex<HashMap<String, AbortHandle>>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    let mut lines = FramedRead::new(input, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                let _ = out_tx.send(jsonrpc::error_message(None, &RpcError::invalid_request(format!("unreadable input line: {e}")))).await;
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let msg = match Message::parse(line.as_bytes()) {
            Ok(m) => m,
            Err(e) => {
                let _ = out_tx.send(jsonrpc::error_message(None, &e)).await;
                continue;
            }
        };
        match msg.kind() {
            Err(e) => {
                let _ = out_tx.send(jsonrpc::error_message(msg.id.as_deref().filter(|i| jsonrpc::valid_id(i).is_ok()), &e)).await;
            }
            Ok(Kind::Response) => {}
            Ok(Kind::Notification) => {
                if msg.method.as_deref() == Some("notifications/cancelled")
                    && let Some(target) = msg
                        .params
                        .as_ref()
                        .and_then(|p| serde_json::from_str::<serde_json::Value>(p.get()).ok())
                        .map(|v| v["requestId"].to_string())
                    && let Some(h) = inflight.lock().ok().and_then(|mut m| m.remove(&target))
                {
                    h.abort();
                }
            }
            Ok(Kind::Request) => {
                let key = msg.id.as_ref().map(|i| i.get().to_string()).unwrap_or_default();
                let id = msg.id.clone();
                let request = match modern::to_request(msg, None) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = out_tx.send(jsonrpc::error_message(id.as_deref(), &e)).await;
                        continue;
                    }
                };
                let svc = svc.clone();
                let tx = out_tx.clone();
                let map = inflight.clone();
                let k = key.clone();
                let handle = tasks.spawn(async move {
                    let id = request.id.clone();
                    match svc.handle(request).await {
                        Reply::Single(o) => {
                            let _ = tx.send(render::outcome_message(&id, &o).1).await;
                        }
                        Reply::Stream(mut s) => {
                            while let Some(ev) = s.next().await {
                                let msg = match ev {
                                    Event::Notification(n) => n,
                                    Event::Done(o) => render::outcome_message(&id, &o).1,
                                };
                                let _ = tx.send(msg).await;
                            }
                        }
                    }
                    if let Ok(mut m) = map.lock() {
                        m.remove(&k);
                    }
                });
                if let Ok(mut m) = inflight.lock() {
                    m.insert(key, handle);
                }
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    drop(out_tx);
    let _ = writer.await;
    Ok(())
}
