//! A real browser for the console's tests: Debian's Chromium, headless, driven over WebDriver
//! by its chromedriver on a loopback port. `scripts/test.sh` installs both
//! (`scripts/setup-test-packages.sh`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use slipway_test_support::eventually;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
    shots: PathBuf,
}

/// chromedriver's log endpoint: what the page wrote to its console (errors, CSP refusals,
/// failed loads) since the last read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({"type": "browser"}).to_string()))
    }
}

impl Browser {
    /// A fresh headless Chromium with an empty profile; screenshots go to
    /// `target/tmp/console-screenshots/{test}`.
    pub async fn start(test: &str) -> Browser {
        for tool in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(tool).exists(),
                "{tool} is missing: scripts/test.sh installs Debian's chromium and chromium-driver"
            );
        }
        let port = crate::common::free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let status = format!("http://127.0.0.1:{port}/status");
        eventually("chromedriver is ready", Duration::from_secs(30), async || {
            let answer = reqwest::get(&status).await.ok()?.json::<Value>().await.ok()?;
            (answer["value"]["ready"] == true).then_some(())
        })
        .await;
        let profile = tempfile::tempdir().unwrap();
        // Without the background-networking flags Chromium keeps calling out, and a closed
        // network refuses it many times a second.
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1280,900",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps: Capabilities = serde_json::from_value(json!({
            "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }))
        .unwrap();
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a Chromium session");
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console-screenshots").join(test);
        std::fs::create_dir_all(&shots).unwrap();
        Browser { client, driver, _profile: profile, shots }
    }

    /// The console's errors since the last call: anything logged at error level.
    pub async fn console_errors(&self) -> Vec<String> {
        let entries = self.client.issue_cmd(BrowserLog).await.expect("read the browser log");
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Fails the test if the page logged an error.
    pub async fn assert_clean(&self, page: &str) {
        let errors = self.console_errors().await;
        assert!(errors.is_empty(), "{page}: console errors: {errors:#?}");
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The text of the first element `css` finds, once there is one.
    pub async fn text(&self, css: &str) -> String {
        eventually(&format!("{css} is on the page"), Duration::from_secs(10), async || {
            match self.client.find(Locator::Css(css)).await {
                Ok(found) => found.text().await.map_err(|e| e.to_string()),
                Err(_) => Err(format!(
                    "{:?}: {}",
                    self.client.current_url().await,
                    self.client.source().await.unwrap_or_default()
                )),
            }
        })
        .await
    }

    pub async fn has(&self, css: &str) -> bool {
        !self.client.find_all(Locator::Css(css)).await.unwrap().is_empty()
    }

    /// Clicks the first element `css` finds, once there is one: the page the last click
    /// led to may still be loading.
    pub async fn click(&self, css: &str) {
        let found = eventually(&format!("{css} is on the page"), Duration::from_secs(10), async || {
            self.client.find(Locator::Css(css)).await.map_err(|e| e.to_string())
        })
        .await;
        found.click().await.unwrap();
    }

    /// Fills the form `css` finds (`(name, value)` pairs), once there is one — the page the
    /// last submit led to may still be loading — and submits it.
    pub async fn submit(&self, css: &str, fields: &[(&str, &str)]) {
        let form = eventually(&format!("{css} is on the page"), Duration::from_secs(10), async || {
            self.client.form(Locator::Css(css)).await.map_err(|e| e.to_string())
        })
        .await;
        for (name, value) in fields {
            form.set_by_name(name, value).await.unwrap_or_else(|e| panic!("{css} {name}: {e}"));
        }
        form.submit().await.unwrap();
    }

    /// Waits until the text at `css` satisfies `f`, and returns it.
    pub async fn wait_text(&self, css: &str, what: &str, f: impl Fn(&str) -> bool) -> String {
        eventually(what, Duration::from_secs(60), async || {
            let text = self
                .client
                .find(Locator::Css(css))
                .await
                .map_err(|e| e.to_string())?
                .text()
                .await
                .map_err(|e| e.to_string())?;
            if f(&text) { Ok(text) } else { Err(text) }
        })
        .await
    }

    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.client.screenshot().await.expect("screenshot");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
