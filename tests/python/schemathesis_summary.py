"""Sums up a schemathesis NDJSON report (`st run --report ndjson`) for
crates/slipway/tests/openapi.rs: the HTTP requests sent, their status codes, the 5xx answers and
the checks that failed, as one JSON object on stdout.

    schemathesis_summary.py REPORT.ndjson
"""

import collections
import json
import sys


def main(path):
    statuses = collections.Counter()
    failed = collections.Counter()
    operations = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            event = json.loads(line)
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished.get("recorder") or {}
            for interaction in (recorder.get("interactions") or {}).values():
                response = interaction.get("response")
                if response is not None:
                    statuses[response["status_code"]] += 1
                    operations.add(recorder.get("label"))
            for checks in (recorder.get("checks") or {}).values():
                for check in checks:
                    if check.get("status") == "failure":
                        failed[check["name"]] += 1
    print(
        json.dumps(
            {
                "requests": sum(statuses.values()),
                "operations": len(operations),
                "statuses": {str(k): v for k, v in sorted(statuses.items())},
                "server_errors": sum(v for k, v in statuses.items() if k >= 500),
                "failed_checks": dict(failed),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
