//! Any REST API with an OpenAPI description as MCP tools, pure: the description read (`doc`: JSON
//! or YAML, Swagger 2.0, OpenAPI 3.0 and 3.1, local `$ref`s only), its selected operations as
//! tools (`ops`), a tool call's arguments as the HTTP request (`call`), and the HTTP answer as the
//! tool's result (`result`). The upstream layer fetches the document and makes the requests.
//!
//! Why plain JSON rather than a typed model (`openapiv3` reads 3.0 only, `oas3` 3.1 only): one
//! walk covers the three dialects real APIs still publish (httpbin serves Swagger 2.0), tolerates
//! the small departures from the schema that public descriptions are full of, and keeps `$ref`
//! resolution in our hands, where "never fetch another document" is enforced.

pub mod call;
pub mod doc;
pub mod ops;
pub mod result;

pub use call::{HttpCall, request};
pub use ops::{Api, Operation, Selection, Skipped, build};
pub use result::{Answer, tool_result};
