//! Walking AWX's paged lists: following `next` links (never to another origin) until a row is
//! found or the list ends, reading each row only as far as its type names.

use reqwest::{Method, Url};

use super::{Http, HttpError};

/// Pages followed in one listing at most (200 rows each): a guard against `next` loops.
const MAX_PAGES: usize = 10_000;

impl Http {
    /// Walks a paged AWX list from `first`, following `next` links, calling `visit` on
    /// every row until it answers `true` (found) or the list ends. Answers whether `visit`
    /// stopped it. Rows are read as `T`: a type naming only the fields it needs skips the
    /// rest of AWX's large job documents instead of building them.
    pub async fn walk<T: serde::de::DeserializeOwned>(
        &self,
        first: Url,
        mut visit: impl FnMut(T) -> bool,
    ) -> Result<bool, HttpError> {
        let mut url = first;
        for _ in 0..MAX_PAGES {
            let what = Self::what(&Method::GET, &url);
            let page: ListPage<T> = self.get_json(&url).await.map_err(|e| match e {
                HttpError::BadBody(m) => HttpError::BadBody(format!("{m} (expected a list with a results array)")),
                other => other,
            })?;
            if page.results.into_iter().any(&mut visit) {
                return Ok(true);
            }
            match page.next {
                Some(next) if !next.is_empty() => {
                    let next_url = self.next_url(&what, &next)?;
                    if next_url == url {
                        return Err(HttpError::BadBody(format!("{what}: the next link points to the same page")));
                    }
                    url = next_url;
                }
                _ => return Ok(false),
            }
        }
        Err(HttpError::BadBody(format!("AAP list longer than {MAX_PAGES} pages")))
    }

    /// Resolves a `next` link (a path with query, or a full URL) against the API root; a
    /// link to another origin is refused (the credentials would go with it).
    fn next_url(&self, what: &str, next: &str) -> Result<Url, HttpError> {
        let url = self
            .s
            .root
            .join(next)
            .map_err(|e| HttpError::BadBody(format!("{what}: invalid next link {next:?}: {e}")))?;
        if url.origin() != self.s.root.origin() {
            return Err(HttpError::Invalid(format!("{what}: refusing a next link to another origin: {next}")));
        }
        Ok(url)
    }
}

/// One page of an AWX list.
#[derive(serde::Deserialize)]
struct ListPage<T> {
    results: Vec<T>,
    #[serde(default)]
    next: Option<String>,
}
