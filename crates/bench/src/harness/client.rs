//! The ARM client side of a scenario: PUTs compute instances, many at once, and follows their
//! operations to the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{API, PUT_CONCURRENCY, SUB};

/// The ARM client side of a scenario.
#[derive(Clone)]
pub struct Client {
    pub base: String,
    pub http: reqwest::Client,
}

/// An accepted PUT.
pub struct Accepted {
    pub name: String,
    pub status_url: String,
    pub latency: Duration,
}

impl Client {
    pub fn new(base: String) -> Client {
        Client { base, http: Self::builder().build().expect("http client") }
    }

    /// A client that sends `token` as its bearer credential with every request.
    pub fn signed_in(base: String, token: &str) -> Result<Client, String> {
        let mut bearer =
            reqwest::header::HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| e.to_string())?;
        bearer.set_sensitive(true);
        let headers = reqwest::header::HeaderMap::from_iter([(reqwest::header::AUTHORIZATION, bearer)]);
        Ok(Client { base, http: Self::builder().default_headers(headers).build().map_err(|e| e.to_string())? })
    }

    fn builder() -> reqwest::ClientBuilder {
        reqwest::Client::builder().pool_max_idle_per_host(256)
    }

    pub fn resource_url(&self, name: &str) -> String {
        format!(
            "{}/subscriptions/{SUB}/resourceGroups/bench/providers/Slipway.Example/computeInstances/{name}?api-version={API}",
            self.base
        )
    }

    /// PUTs one compute instance; `delay_seconds` sets its simulator job's duration.
    pub async fn put(&self, name: &str, delay_seconds: Option<f64>) -> Result<Accepted, String> {
        let mut properties = json!({"size": "small", "image": "debian"});
        if let Some(d) = delay_seconds {
            properties["delaySeconds"] = json!(d);
        }
        let start = Instant::now();
        let response = self
            .http
            .put(self.resource_url(name))
            .json(&json!({"location": "local", "properties": properties}))
            .send()
            .await
            .map_err(|e| format!("PUT {name}: {e}"))?;
        let latency = start.elapsed();
        if response.status().as_u16() != 201 && response.status().as_u16() != 200 {
            return Err(format!("PUT {name}: {}", response.status()));
        }
        let status_url = response
            .headers()
            .get("azure-asyncoperation")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| format!("PUT {name}: no Azure-AsyncOperation"))?
            .to_string();
        Ok(Accepted { name: name.to_string(), status_url, latency })
    }

    /// PUTs `names` with at most [`PUT_CONCURRENCY`] in flight.
    pub async fn put_all(&self, names: Vec<String>, delay_seconds: Option<f64>) -> Result<Vec<Accepted>, String> {
        let names = Arc::new(std::sync::Mutex::new(names.into_iter().enumerate()));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..PUT_CONCURRENCY {
            let (client, names) = (self.clone(), names.clone());
            tasks.spawn(async move {
                let mut done = Vec::new();
                loop {
                    let next = names.lock().expect("names").next();
                    let Some((i, name)) = next else { return Ok::<_, String>(done) };
                    done.push((i, client.put(&name, delay_seconds).await?));
                }
            });
        }
        let mut all = Vec::new();
        while let Some(done) = tasks.join_next().await {
            all.extend(done.map_err(|e| e.to_string())??);
        }
        all.sort_by_key(|(i, _)| *i);
        Ok(all.into_iter().map(|(_, a)| a).collect())
    }

    /// The operation's status, or an error.
    pub async fn status(&self, status_url: &str) -> Result<String, String> {
        let body = self.operation(status_url).await?;
        body["status"].as_str().map(str::to_string).ok_or_else(|| format!("no status in {body}"))
    }

    /// The operation's whole status document.
    pub async fn operation(&self, status_url: &str) -> Result<Value, String> {
        let response = self.http.get(status_url).send().await.map_err(|e| e.to_string())?;
        response.json().await.map_err(|e| e.to_string())
    }

    /// Waits until every operation Succeeded (in order: one GET per finished operation plus
    /// one per `interval` while the oldest is still running).
    pub async fn wait_succeeded(
        &self,
        status_urls: &[String],
        interval: Duration,
        limit: Duration,
    ) -> Result<(), String> {
        let start = Instant::now();
        for url in status_urls {
            loop {
                match self.status(url).await?.as_str() {
                    "Succeeded" => break,
                    s @ ("Failed" | "Canceled") => return Err(format!("operation ended {s}")),
                    _ => {}
                }
                if start.elapsed() > limit {
                    return Err(format!("operations did not finish within {limit:?}"));
                }
                tokio::time::sleep(interval).await;
            }
        }
        Ok(())
    }
}
