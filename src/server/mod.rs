//! Serving clients: the Streamable HTTP listener (`http`), the stdio server (`stdio`), era
//! classification (`era`), the modern and legacy edge adapters (`modern`, `legacy`,
//! `legacy_http`), input requests bridged to legacy clients (`bridge`), DNS-rebinding protection
//! (`origin`), reply rendering (`render`) and the worker threads of the data path (`workers`).

pub mod bridge;
mod connect;
pub mod conns;
pub mod consent;
mod console;
mod cors;
pub mod era;
pub mod http;
pub mod legacy;
pub mod legacy_http;
mod listener;
pub mod modern;
pub mod origin;
pub mod render;
mod slow;
pub mod stack;
pub mod stdio;
pub mod tls;
pub mod workers;
