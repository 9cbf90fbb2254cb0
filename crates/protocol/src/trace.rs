//! W3C Trace Context (`traceparent`): the one format check the gateway needs to pass a caller's
//! trace on. A trace context arrives in `_meta` (both eras of MCP carry it there) or as the HTTP
//! header; it goes upstream in `_meta` (stdio and HTTP) and as the `traceparent` header (HTTP).

/// Whether `v` is a well-formed version-00 `traceparent` with non-zero ids.
pub fn valid_traceparent(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let nonzero = |s: &str| s.bytes().any(|b| b != b'0');
    parts.len() == 4
        && parts[0] == "00"
        && hex(parts[1], 32)
        && nonzero(parts[1])
        && hex(parts[2], 16)
        && nonzero(parts[2])
        && hex(parts[3], 2)
}

/// Takes the `traceparent` (and `tracestate`) HTTP headers into `_meta` when `_meta` has no
/// trace context of its own, so it reaches stdio upstreams too.
pub fn adopt(headers: &http::HeaderMap, meta: &mut serde_json::Map<String, serde_json::Value>) {
    if meta.contains_key("traceparent") {
        return;
    }
    let Some(tp) = headers.get("traceparent").and_then(|v| v.to_str().ok()).map(str::trim).filter(|v| valid_traceparent(v)) else {
        return;
    };
    meta.insert("traceparent".into(), tp.into());
    if let Some(ts) = headers.get("tracestate").and_then(|v| v.to_str().ok()).filter(|v| v.len() <= 512 && v.is_ascii()) {
        meta.insert("tracestate".into(), ts.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_well_formed_trace_contexts() {
        assert!(valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert!(!valid_traceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01"));
        assert!(!valid_traceparent("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"));
        assert!(!valid_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        assert!(!valid_traceparent("00-abc"));
        assert!(!valid_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nx: y"));
    }
}
