//! Serving clients: the Streamable HTTP listener (`http`), the stdio server (`stdio`), the
//! modern-era edge adapter (`modern`), DNS-rebinding protection (`origin`) and reply rendering
//! (`render`).

pub mod http;
pub mod modern;
pub mod origin;
pub mod render;
pub mod stdio;
