//! ARM's request headers: a correlation id the client did not send is made up for it, as ARM
//! does, answered, and recorded with the operation the request started; one it sent is kept.

use serde_json::json;
use slipway_domain::{Clock, OperationId, SubscriptionId, SystemClock};

use crate::common::{SUB, TestServer, header, rid};

async fn recorded_correlation(s: &TestServer, status_url: &str) -> String {
    let id = status_url.split('?').next().and_then(|p| p.rsplit('/').next()).and_then(OperationId::parse);
    let store = s.app.as_ref().unwrap().store();
    let op = store.get_operation(&SubscriptionId::new(SUB), &id.expect("an operation id"), SystemClock.now()).await;
    op.expect("read").expect("the operation").initiator.correlation_request_id
}

#[tokio::test]
async fn every_request_has_a_correlation_id_and_its_operation_records_it() {
    let mut s = TestServer::start().await;
    let body = json!({"location": "local", "properties": {"addressSpace": "10.0.0.0/16"}});

    let r = s.put(&rid("virtualNetworks", "made-up"), body.clone()).await;
    assert_eq!(r.status().as_u16(), 201);
    let made_up = header(&r, "x-ms-correlation-request-id").expect("a correlation id was made up");
    assert!(OperationId::parse(&made_up).is_some(), "a UUID, as ARM's are: {made_up}");
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(recorded_correlation(&s, &status_url).await, made_up);

    let r = s
        .http
        .put(s.url(&rid("virtualNetworks", "sent")))
        .header("x-ms-correlation-request-id", "0b9d1f3e-0000-4000-8000-00000000c0de")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(header(&r, "x-ms-correlation-request-id").as_deref(), Some("0b9d1f3e-0000-4000-8000-00000000c0de"));
    let status_url = header(&r, "azure-asyncoperation").unwrap();
    assert_eq!(recorded_correlation(&s, &status_url).await, "0b9d1f3e-0000-4000-8000-00000000c0de");

    // A read gets one too, and a fresh one each time.
    let a = header(&s.get(&rid("virtualNetworks", "sent")).await, "x-ms-correlation-request-id");
    let b = header(&s.get(&rid("virtualNetworks", "sent")).await, "x-ms-correlation-request-id");
    assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
    s.stop().await;
}
