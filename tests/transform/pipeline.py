"""A small orders pipeline for the derivative tests: a root fed by CSV files, derivatives."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

ORDERS = "com.example.orders"
LARGE = "com.example.orders.large"
HOURLY = "com.example.orders.hourly"
T0 = datetime(2024, 1, 1, tzinfo=UTC)

HOURLY_SQL = """SELECT window.end AS event_time, customer, count(*) AS orders, sum(amount) AS total
FROM `com.example.orders`
GROUP BY window(event_time, '1 hour'), customer"""


def manifest(dataset_id: str, source: dict) -> dict:
    return {"apiVersion": 1, "kind": "DatasetSnapshot", "content": {"id": dataset_id, "source": source}}


def root_source(preprocess: str | None = None) -> dict:
    source = {
        "kind": "root",
        "fetch": {"kind": "filesGlob", "path": "orders/*.csv", "order": "byName"},
        "read": {"kind": "csv", "header": True,
                 "schema": ["event_time TIMESTAMP", "order_id BIGINT", "customer STRING", "amount DOUBLE"]},
        "merge": {"kind": "ledger", "primaryKey": ["order_id"]},
    }
    if preprocess:
        source["preprocess"] = {"kind": "sql", "engine": "spark", "query": preprocess}
    return source


def derivative_source(query: str, inputs=(ORDERS,)) -> dict:
    return {"kind": "derivative", "inputs": list(inputs),
            "transform": {"kind": "sql", "engine": "spark", "query": query}}


def write_manifests(home: Path, hourly_sql: str = HOURLY_SQL, large_sql: str | None = None) -> Path:
    folder = home / "manifests"
    folder.mkdir(exist_ok=True)
    large_sql = large_sql or (
        f"SELECT event_time, order_id, customer, amount FROM `{ORDERS}` WHERE amount > 10"
    )
    docs = {
        ORDERS: manifest(ORDERS, root_source()),
        LARGE: manifest(LARGE, derivative_source(large_sql)),
        HOURLY: manifest(HOURLY, derivative_source(hourly_sql)),
    }
    for dataset_id, doc in docs.items():
        (folder / f"{dataset_id}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder


def order_rows(n_hours: int, per_hour: int = 4) -> list[tuple]:
    """Deterministic orders: (event_time, order_id, customer, amount), in time order."""
    rows = []
    for i in range(n_hours * per_hour):
        t = T0 + timedelta(minutes=15 * i)
        rows.append((t, i, ["ann", "bob", "cid"][i % 3], float((i * 7) % 23)))
    return rows


def write_orders_file(home: Path, name: str, rows: list[tuple]) -> None:
    folder = home / "orders"
    folder.mkdir(exist_ok=True)
    lines = ["event_time,order_id,customer,amount"]
    lines += [f"{t.strftime('%Y-%m-%dT%H:%M:%SZ')},{i},{c},{a}" for t, i, c, a in rows]
    (folder / name).write_text("\n".join(lines) + "\n")


def expected_hourly(rows: list[tuple], watermark: datetime) -> list[dict]:
    """The batch GROUP BY over all rows, keeping the windows the watermark has closed."""
    groups: dict = {}
    for t, _, customer, amount in rows:
        start = t.replace(minute=0, second=0)
        g = groups.setdefault((start + timedelta(hours=1), customer), [0, 0.0])
        g[0] += 1
        g[1] += amount
    return sorted(
        ({"event_time": end, "customer": c, "orders": n, "total": total}
         for (end, c), (n, total) in groups.items() if end <= watermark),
        key=lambda r: (r["event_time"], r["customer"]),
    )
