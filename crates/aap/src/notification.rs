//! AWX/AAP webhook notifications: a notification template of type webhook POSTs the job's
//! summary (`id`, `status`, `name`, …) when a job starts, succeeds or fails. Only an ending
//! is worth an immediate status read; a start changes nothing a client waits for.

use serde_json::Value;

/// The job a notification body says ended (see `Provider::job_from_notification`).
pub(crate) fn job_from_notification(body: &[u8]) -> Result<Option<String>, String> {
    let notification: Value = serde_json::from_slice(body)
        .map_err(|_| "Expected an AAP job notification (JSON) with an 'id'.".to_string())?;
    let job_id = match &notification["id"] {
        Value::Number(n) => n.as_u64().map(|n| n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let Some(job_id) = job_id else {
        return Err("Expected an AAP job notification with an 'id'.".into());
    };
    let still_running = matches!(notification["status"].as_str(), Some("new" | "pending" | "waiting" | "running"));
    Ok((!still_running).then_some(job_id))
}

#[cfg(test)]
mod tests {
    use super::job_from_notification;

    #[test]
    fn endings_name_their_job_and_starts_need_nothing() {
        for (body, want) in [
            (r#"{"id": 42, "status": "successful"}"#, Ok(Some("42"))),
            (r#"{"id": "42", "status": "failed"}"#, Ok(Some("42"))),
            (r#"{"id": 42}"#, Ok(Some("42"))),
            (r#"{"id": 42, "status": "running"}"#, Ok(None)),
            (r#"{"id": 42, "status": "pending"}"#, Ok(None)),
            (r#"{"status": "successful"}"#, Err(())),
            (r#"{"id": "", "status": "successful"}"#, Err(())),
            (r#"{"id": -1}"#, Err(())),
            ("not json", Err(())),
        ] {
            let got = job_from_notification(body.as_bytes());
            match want {
                Ok(job) => assert_eq!(got, Ok(job.map(str::to_string)), "{body}"),
                Err(()) => assert!(got.is_err(), "{body}: {got:?}"),
            }
        }
    }
}
