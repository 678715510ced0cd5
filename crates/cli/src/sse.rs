//! Just enough of the event-stream format (Server-Sent Events) for what Slipway streams: a
//! message is its `event:` name (`message` when none) and its `data:` lines, ended by a
//! blank line; `id:` is kept; comments (keep-alives) carry nothing.

use reqwest::{RequestBuilder, Response};

use crate::error::{ApiError, CliError};

#[derive(Debug, PartialEq)]
pub struct Message {
    pub event: String,
    pub data: String,
    pub id: Option<String>,
}

/// Reads messages off a streaming answer as they arrive.
pub struct Stream {
    response: Response,
    buffer: Vec<u8>,
    lines: Lines,
}

impl Stream {
    /// Sends `request` asking for an event stream; an error answer is the API's error.
    pub async fn open(request: RequestBuilder) -> Result<Stream, CliError> {
        let response = request.header("accept", "text/event-stream").send().await.map_err(crate::client::transport)?;
        let status = response.status().as_u16();
        if status >= 400 {
            let text = response.text().await.unwrap_or_default();
            return Err(CliError::Api(ApiError::from_body(status, &text)));
        }
        Ok(Stream { response, buffer: Vec::new(), lines: Lines::default() })
    }

    /// The next message; `None` when the server closed the stream.
    pub async fn next(&mut self) -> Result<Option<Message>, CliError> {
        loop {
            while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if let Some(message) = self.lines.line(String::from_utf8_lossy(&line).trim_end_matches(['\n', '\r'])) {
                    return Ok(Some(message));
                }
            }
            match self.response.chunk().await.map_err(crate::client::transport)? {
                Some(chunk) => self.buffer.extend_from_slice(&chunk),
                None => return Ok(None),
            }
        }
    }
}

/// A message being read, line by line.
#[derive(Default)]
struct Lines {
    event: Option<String>,
    data: Vec<String>,
    id: Option<String>,
}

impl Lines {
    fn line(&mut self, line: &str) -> Option<Message> {
        if line.is_empty() {
            let event = self.event.take();
            let id = self.id.take();
            if self.data.is_empty() {
                return None;
            }
            let data = std::mem::take(&mut self.data).join("\n");
            return Some(Message { event: event.unwrap_or_else(|| "message".into()), data, id });
        }
        let field = |name: &str| line.strip_prefix(name).map(|v| v.strip_prefix(' ').unwrap_or(v).to_string());
        if let Some(v) = field("event:") {
            self.event = Some(v);
        } else if let Some(v) = field("data:") {
            self.data.push(v);
        } else if let Some(v) = field("id:") {
            self.id = Some(v);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_their_event_data_and_id_and_comments_carry_nothing() {
        let mut r = Lines::default();
        let lines = [
            ": keep-alive",
            "",
            "data: TASK [x]",
            "",
            "id: 7",
            "event: resourceCreated",
            "data: {}",
            "",
            "event: end",
            "data: Failed",
            "",
        ];
        let messages: Vec<Message> = lines.iter().filter_map(|l| r.line(l)).collect();
        assert_eq!(
            messages,
            vec![
                Message { event: "message".into(), data: "TASK [x]".into(), id: None },
                Message { event: "resourceCreated".into(), data: "{}".into(), id: Some("7".into()) },
                Message { event: "end".into(), data: "Failed".into(), id: None },
            ]
        );
    }
}
