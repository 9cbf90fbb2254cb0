//! A browser for the consent-page tests, played over plain HTTP: cookies kept per name and sent
//! only to the gateway, redirects followed by hand, forms posted with the gateway's own Origin;
//! and reading what a page shows (its heading, a hidden field).

use crate::harness::*;
use crate::identity_cluster::{get_with, header};

/// A browser: its cookies for the gateway, by name.
#[derive(Default)]
pub(crate) struct Browser {
    cookies: Vec<(String, String)>,
}

impl Browser {
    pub(crate) fn cookie(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    fn keep(&mut self, r: &Resp) {
        for v in r.headers.get_all("set-cookie") {
            let Some((k, v)) = v.to_str().ok().and_then(|c| c.split(';').next()).and_then(|c| c.split_once('=')) else { continue };
            self.cookies.retain(|(name, _)| name != k);
            self.cookies.push((k.to_string(), v.to_string()));
        }
    }

    /// A GET at the gateway, with its cookies.
    pub(crate) async fn get(&mut self, url: &str) -> Resp {
        let cookie = self.cookie();
        let r = get_with(url, &[("Cookie", cookie.as_str())]).await;
        self.keep(&r);
        r
    }

    /// A form posted to the gateway from its own pages.
    pub(crate) async fn post(&mut self, url: &str, fields: &[(&str, &str)], gateway: &str) -> Resp {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in fields {
            form.append_pair(k, v);
        }
        let cookie = self.cookie();
        let r = post_raw(
            url,
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Cookie", cookie.as_str()), ("Origin", gateway)],
            form.finish(),
        )
        .await;
        self.keep(&r);
        r
    }

    /// GETs `url` (the gateway's cookies only go to the gateway), following redirects.
    pub(crate) async fn open(&mut self, url: &str, gateway: &str) -> (Resp, String) {
        let mut url = url.to_string();
        for _ in 0..8 {
            let cookie = if url.starts_with(gateway) { self.cookie() } else { String::new() };
            let r = get_with(&url, &[("Cookie", &cookie)]).await;
            self.keep(&r);
            if !(300..400).contains(&r.status) {
                return (r, url);
            }
            url = header(&r, "location");
            if url.starts_with('/') {
                url = format!("{gateway}{url}");
            }
        }
        panic!("too many redirects at {url}");
    }

    /// POSTs a form of the gateway's, then follows where it leads.
    pub(crate) async fn submit(&mut self, url: &str, fields: &[(&str, &str)], gateway: &str) -> (Resp, String) {
        let r = self.post(url, fields, gateway).await;
        if (300..400).contains(&r.status) {
            let next = header(&r, "location");
            return self.open(&next, gateway).await;
        }
        (r, url.to_string())
    }
}

pub(crate) fn body(r: &Resp) -> String {
    String::from_utf8_lossy(&r.body).to_string()
}

pub(crate) fn field(html: &str, name: &str) -> String {
    let at = html.find(&format!("name=\"{name}\" value=\"")).unwrap_or_else(|| panic!("no {name} in the page: {html}"));
    let rest = &html[at + name.len() + 15..];
    rest[..rest.find('"').expect("a closing quote")].to_string()
}

pub(crate) fn heading(r: &Resp) -> String {
    let html = body(r);
    html.split("<h1>").nth(1).and_then(|h| h.split("</h1>").next()).unwrap_or_default().to_string()
}

/// A gateway `Location`, made absolute.
pub(crate) fn at_gateway(location: &str, gateway: &str) -> String {
    if location.starts_with('/') { format!("{gateway}{location}") } else { location.to_string() }
}

/// The caller `who` (API key `key`) asks `tool` for its consent link, opens it, and proves on the
/// sign-in page to be that caller with its key: the browser, and the page the link shows then.
pub(crate) async fn signed_in_at_link(url: &str, gateway: &str, who: &str, key: &str, tool: &str) -> (Browser, Resp) {
    let asked = crate::identity_cluster::call_as(url, key, tool).await;
    assert_eq!(asked["result"]["isError"], true, "{who} is not connected yet, so the tool hands out a link: {asked}");
    let link = crate::identity_cluster::link_in(&text_of(&asked));
    assert!(link.starts_with(&format!("{gateway}/oauth/connect?grant=")), "{link}");
    let mut b = Browser::default();
    let page = b.get(&link).await;
    assert_eq!((page.status, heading(&page)), (200, format!("Sign in as {who}")), "{}", body(&page));
    let html = body(&page);
    let signed = b
        .post(
            &format!("{gateway}/oauth/signin"),
            &[("grant", &field(&html, "grant")), ("csrf", &field(&html, "csrf")), ("key", key)],
            gateway,
        )
        .await;
    assert_eq!(signed.status, 303, "{}", body(&signed));
    let page = b.get(&at_gateway(&header(&signed, "location"), gateway)).await;
    (b, page)
}
