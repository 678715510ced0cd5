//! Reading a Server-Sent Events body as it arrives, as a browser's `EventSource` would.

/// The messages of an `text/event-stream` answer.
pub struct SseReader {
    body: reqwest::Response,
    buffer: String,
    /// The `id` of the last message that had one: what a reconnect sends as `Last-Event-ID`.
    pub last_id: Option<String>,
}

impl SseReader {
    pub fn new(body: reqwest::Response) -> Self {
        SseReader { body, buffer: String::new(), last_id: None }
    }

    /// The next message: `(event name, data)`, keep-alive comments skipped; `None` once the
    /// stream closed.
    pub async fn next(&mut self) -> Option<(String, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut name, mut data) = ("message".to_string(), Vec::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    } else if let Some(v) = line.strip_prefix("id:") {
                        self.last_id = Some(v.trim().to_string());
                    }
                }
                if data.is_empty() && name == "message" {
                    continue; // a keep-alive comment
                }
                return Some((name, data.join("\n")));
            }
            let chunk = self.body.chunk().await.ok()??;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}
