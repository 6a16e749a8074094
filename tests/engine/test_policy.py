"""The SQL policy (engines/spark/odf_spark_engine/policy.py): a query reads only its declared
inputs and earlier steps, changes nothing in the engine, and computes the same result every
time it runs. Each refused shape gets one FORBIDDEN line naming the step and what it used;
every shape of query the engine supports is still accepted.

All through ValidateQuery in the shared sandboxed engine (a refused query never starts).
"""
from __future__ import annotations

from datetime import UTC, date, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_testkit import T0, VOCAB, input_schema, records

from coordinator.engine.port import (
    EngineError,
    EngineErrorKind,
    InputSchema,
    PreprocessRequest,
    ValidateRequest,
)
from coordinator.metadata.objects import SqlQueryStep, TransformSql

pytestmark = pytest.mark.spark

ORDERS = InputSchema("com.example.orders", VOCAB,
                     input_schema(order_id=pa.int64(), customer=pa.string(), amount=pa.float64()))
PAYMENTS = InputSchema("com.example.payments", VOCAB,
                       input_schema(order_id=pa.int64(), paid=pa.float64()))
ORDER = {"event_time": T0, "order_id": 1, "customer": "c1", "amount": 5.0}
ORD = "`com.example.orders`"
PAY = "`com.example.payments`"


def validate(engine_client, transform: TransformSql | str):
    if isinstance(transform, str):
        transform = TransformSql(engine="spark", query=transform)
    return engine_client.validate(ValidateRequest(
        transaction_id="policy", dataset_id="com.example.out", inputs=[ORDERS, PAYMENTS],
        transform=transform, vocab=VOCAB,
    ))


REFUSED = {
    # reading anything but the inputs
    "text file": (f"SELECT o.*, s.value AS leaked FROM {ORD} o CROSS JOIN text.`/etc/hostname` s",
                  "path relation text.`/etc/hostname`"),
    "csv file": (f"SELECT * FROM {ORD} WHERE customer IN (SELECT _c0 FROM csv.`/etc/passwd`)",
                 "path relation csv.`/etc/passwd`"),
    "parquet folder": ("SELECT * FROM parquet.`/tmp`", "path relation parquet.`/tmp`"),
    "json file": ("SELECT * FROM json.`/tmp/x.json`", "path relation json.`/tmp/x.json`"),
    "orc file": ("SELECT * FROM orc.`/tmp/x`", "path relation orc.`/tmp/x`"),
    "binary files": ("SELECT * FROM binaryFile.`/root`", "path relation binaryFile.`/root`"),
    "path through IDENTIFIER": ("SELECT * FROM IDENTIFIER('text.`/etc/hostname`')",
                                "path relation text.`/etc/hostname`"),
    "path through a computed IDENTIFIER": ("SELECT * FROM IDENTIFIER('text.' || '`/etc/hostname`')",
                                           "IDENTIFIER() of a computed name is not allowed"),
    "path in a CTE": (f"WITH f AS (SELECT * FROM text.`/etc/hostname`) SELECT * FROM {ORD}, f",
                      "path relation text.`/etc/hostname`"),
    "file reader function": ("SELECT * FROM read_files('/etc')", "table function read_files()"),
    "catalog table": ("SELECT * FROM default.orders", "relation default.orders is not a declared input"),
    "unknown view": ("SELECT * FROM orders", "relation orders is not a declared input"),
    "unquoted input id": ("SELECT * FROM com.example.orders", "quote its name: `com.example.orders`"),
    # running code, changing the engine
    "java_method": (f"SELECT *, java_method('java.lang.System', 'getenv', 'HOME') AS h FROM {ORD}",
                    "function java_method() is not allowed: it calls Java code"),
    "reflect": (f"SELECT *, reflect('java.lang.System', 'getProperty', 'user.home') AS h FROM {ORD}",
                "function reflect()"),
    "reflect in a table function argument": ("SELECT * FROM range(length(reflect('java.lang.System', "
                                             "'getenv', 'HOME')))", "function reflect()"),
    "script": (f"SELECT TRANSFORM(customer) USING 'cat' AS (c) FROM {ORD}",
               "TRANSFORM ... USING is not allowed"),
    "SET": ("SET spark.sql.variable.substitute=true", "SET is not allowed"),
    "RESET": ("RESET", "RESET is not allowed"),
    "ADD JAR": ("ADD JAR /tmp/evil.jar", "ADD JAR is not allowed"),
    "CREATE FUNCTION": ("CREATE FUNCTION f AS 'com.example.Evil'", "CREATE FUNCTION is not allowed"),
    "CREATE TEMPORARY FUNCTION": ("CREATE TEMPORARY FUNCTION f AS 'com.example.Evil'",
                                  "CREATE FUNCTION is not allowed"),
    "CREATE VIEW": (f"CREATE TEMPORARY VIEW v AS SELECT * FROM {ORD}",
                    "CREATE VIEW is not allowed (a step is one query"),
    "USE": ("USE other", "USE is not allowed"),
    "CACHE TABLE": (f"CACHE TABLE {ORD}", "CACHE TABLE is not allowed"),
    "INSERT": (f"INSERT INTO {ORD} SELECT * FROM {ORD}", "INSERT is not allowed"),
    "write a folder": (f"INSERT OVERWRITE DIRECTORY '/tmp/out' USING parquet SELECT * FROM {ORD}",
                       "INSERT OVERWRITE DIRECTORY is not allowed"),
    "EXECUTE IMMEDIATE": ("EXECUTE IMMEDIATE 'SET a=b'", "EXECUTE IMMEDIATE is not allowed"),
    "TABLESAMPLE": (f"SELECT * FROM {ORD} TABLESAMPLE (50 PERCENT)", "TABLESAMPLE is not allowed"),
    # results that depend on the moment, the session, the machine or chance
    "rand": (f"SELECT *, rand() AS r FROM {ORD}", "function rand() is not allowed: it is random"),
    "randn": (f"SELECT *, randn(7) AS r FROM {ORD}", "function randn()"),
    "uuid": (f"SELECT *, uuid() AS id FROM {ORD}", "function uuid()"),
    "shuffle": (f"SELECT *, shuffle(array(1, 2, 3)) AS s FROM {ORD}", "function shuffle()"),
    "current_timestamp": (f"SELECT *, current_timestamp() AS t FROM {ORD}",
                          "function current_timestamp() is not allowed: it depends on the moment"),
    "current_timestamp without parentheses": (f"SELECT *, current_timestamp AS t FROM {ORD}",
                                              "function current_timestamp()"),
    "now": (f"SELECT *, now() AS t FROM {ORD}", "function now()"),
    "current_date without parentheses": (f"SELECT *, current_date AS d FROM {ORD}",
                                         "function current_date()"),
    "localtimestamp": (f"SELECT *, localtimestamp() AS t FROM {ORD}", "function localtimestamp()"),
    "unix_timestamp of now": (f"SELECT *, unix_timestamp() AS t FROM {ORD}", "function current_timestamp()"),
    "current_timezone": (f"SELECT *, current_timezone() AS z FROM {ORD}", "function current_timezone()"),
    "current_user": (f"SELECT *, current_user() AS u FROM {ORD}", "function current_user()"),
    "user without parentheses": (f"SELECT *, user AS u FROM {ORD}", "function current_user()"),
    "session_user": (f"SELECT *, session_user() AS u FROM {ORD}", "function session_user()"),
    "current_database": (f"SELECT *, current_database() AS d FROM {ORD}", "function current_database()"),
    "current_catalog": (f"SELECT *, current_catalog() AS c FROM {ORD}", "function current_catalog()"),
    "current_path": (f"SELECT *, current_path() AS p FROM {ORD}", "function current_path()"),
    "version": (f"SELECT *, version() AS v FROM {ORD}", "function version()"),
    "input_file_name": (f"SELECT *, input_file_name() AS f FROM {ORD}", "function input_file_name()"),
    "spark_partition_id": (f"SELECT *, spark_partition_id() AS p FROM {ORD}",
                           "function spark_partition_id()"),
    "monotonically_increasing_id": (f"SELECT *, monotonically_increasing_id() AS i FROM {ORD}",
                                    "function monotonically_increasing_id()"),
    "random in a scalar subquery": (f"SELECT * FROM {ORD} WHERE amount > (SELECT rand())", "function rand()"),
}


def refusal(engine_client, query: str) -> EngineError:
    """The engine's refusal of ``query``: FORBIDDEN, in one line."""
    with pytest.raises(EngineError) as failure:
        validate(engine_client, query)
    error = failure.value
    assert error.kind is EngineErrorKind.FORBIDDEN, error
    assert "\n" not in error.message
    return error


@pytest.mark.parametrize("query, expected", REFUSED.values(), ids=REFUSED.keys())
def test_refused(engine_client, query, expected):
    error = refusal(engine_client, query)
    assert error.message.startswith("step 0 (the output): ")
    assert expected in error.message
    assert (error.position.step, error.position.alias) == (0, "")


NOW = "the special datetime value 'now' (the moment the query runs) is not allowed"
TODAY = "the special datetime value 'today' (the day the query runs)"
RANDOM_IV = "function aes_encrypt() is not allowed without a constant IV (its fifth argument)"
KEY = "'0000111122223333'"
# Spark turns special datetime strings into the time of the run wherever a constant string
# becomes a date or timestamp, and aes_encrypt draws a random IV unless it is given one.
CLOCK_AND_CHANCE = {
    # typed literals: the parser replaces them by the current time
    "TIMESTAMP 'now'": (f"SELECT *, TIMESTAMP 'now' AS t FROM {ORD}", NOW),
    "TIMESTAMP_NTZ, case and spaces": (f"SELECT *, TIMESTAMP_NTZ ' NoW ' AS t FROM {ORD}", NOW),
    "TIMESTAMP_LTZ, double quotes, comment": (
        f'SELECT *, timestamp_ltz /* the day after */ "tomorrow" AS t FROM {ORD}',
        "the special datetime value 'tomorrow' (the day after the query runs)"),
    "DATE 'today'": (f"SELECT *, DATE 'today' AS d FROM {ORD}", TODAY),
    "DATE 'yesterday' with a time zone": (
        f"SELECT *, DATE 'yesterday Europe/Oslo' AS d FROM {ORD}",
        "the special datetime value 'yesterday' (the day before the query runs)"),
    "typed literal in VALUES": (
        f"SELECT o.* FROM {ORD} o JOIN (VALUES (TIMESTAMP 'now')) AS v(t) ON o.event_time < v.t", NOW),
    "typed literal in a table function argument": (
        f"SELECT o.* FROM {ORD} o JOIN range(unix_timestamp(TIMESTAMP 'now') % 3) r ON r.id = 0", NOW),
    # casts of constant strings: Spark's optimizer replaces them by the current time
    "CAST": (f"SELECT *, CAST('now' AS TIMESTAMP) AS t FROM {ORD}", NOW),
    "try_cast": (f"SELECT *, try_cast('Now' AS TIMESTAMP) AS t FROM {ORD}", NOW),
    "cast to TIMESTAMP_NTZ": (f"SELECT *, CAST('now' AS TIMESTAMP_NTZ) AS t FROM {ORD}", NOW),
    "to_timestamp": (f"SELECT *, to_timestamp('now') AS t FROM {ORD}", NOW),
    "to_timestamp_ntz": (f"SELECT *, to_timestamp_ntz('now') AS t FROM {ORD}", NOW),
    "to_date": (f"SELECT *, to_date('today') AS d FROM {ORD}", TODAY),
    "implicit cast of a date function argument": (f"SELECT *, date_add('today', 1) AS d FROM {ORD}", TODAY),
    "implicit cast in a comparison": (f"SELECT * FROM {ORD} WHERE event_time < 'now'", NOW),
    "folded concat": (f"SELECT *, CAST(concat('no', 'w') AS TIMESTAMP) AS t FROM {ORD}", NOW),
    "folded substring": (f"SELECT *, CAST(substring('today or never', 1, 5) AS DATE) AS d FROM {ORD}", TODAY),
    "folded nvl": (f"SELECT *, CAST(nvl(NULL, 'now') AS TIMESTAMP) AS t FROM {ORD}", NOW),
    "in a CTE": (f"WITH c AS (SELECT CAST('today' AS DATE) AS d) SELECT o.* FROM {ORD} o, c "
                 "WHERE o.event_time > c.d", TODAY),
    "in a scalar subquery": (
        f"SELECT * FROM {ORD} WHERE event_time < (SELECT CAST('now' AS TIMESTAMP))", NOW),
    # chance
    "aes_encrypt (GCM)": (f"SELECT *, aes_encrypt(customer, {KEY}) AS secret FROM {ORD}", RANDOM_IV),
    "aes_encrypt (CBC)": (f"SELECT *, aes_encrypt(customer, {KEY}, 'CBC') AS secret FROM {ORD}", RANDOM_IV),
    "aes_encrypt with an IV from the data": (
        f"SELECT *, aes_encrypt(customer, {KEY}, 'GCM', 'DEFAULT', unhex(customer)) AS secret FROM {ORD}",
        RANDOM_IV),
}


@pytest.mark.parametrize("query, expected", CLOCK_AND_CHANCE.values(), ids=CLOCK_AND_CHANCE.keys())
def test_the_clock_and_chance_in_constants_are_refused(engine_client, query, expected):
    assert refusal(engine_client, query).message.startswith(f"step 0 (the output): {expected}")


def test_datetime_constants_and_data_values_run(make_chain):
    # 'epoch' is a constant; a string from the data is never special (Spark reads special
    # values only in constant strings), so try_cast gives null for it, as for any non-date.
    chain = make_chain(f"""
        SELECT event_time, TIMESTAMP '2024-01-01 12:00:00' AS noon, CAST('epoch' AS TIMESTAMP) AS epoch,
               DATE 'epoch' AS epoch_day, try_cast(customer AS TIMESTAMP) AS customer_time,
               try_to_date(customer) AS customer_day,
               aes_encrypt(customer, {KEY}, 'GCM', 'DEFAULT', unhex('000000000000000000000000')) AS secret
        FROM {ORD}""", {ORDERS.dataset_id: ORDERS.schema})
    result = chain.execute({ORDERS.dataset_id: [[{**ORDER, "customer": " now "}]]})
    [row] = records(result.output_path)
    assert row["noon"] == datetime(2024, 1, 1, 12, tzinfo=UTC)
    assert row["epoch"] == datetime(1970, 1, 1, tzinfo=UTC)
    assert row["epoch_day"] == date(1970, 1, 1)
    assert (row["customer_time"], row["customer_day"]) == (None, None)
    assert row["secret"][:12] == bytes(12)  # GCM output starts with the IV it was given


def test_refusal_names_the_step_and_its_alias(engine_client):
    transform = TransformSql(engine="spark", queries=[
        SqlQueryStep(alias="big", query=f"SELECT * FROM {ORD} WHERE amount > 10"),
        SqlQueryStep(alias="tagged", query="SELECT *, uuid() AS tag FROM big"),
        SqlQueryStep(query="SELECT * FROM tagged"),
    ])
    with pytest.raises(EngineError) as failure:
        validate(engine_client, transform)
    assert failure.value.kind is EngineErrorKind.FORBIDDEN
    assert failure.value.message.startswith("step 1 (tagged): function uuid() is not allowed")


def test_a_later_step_may_not_read_a_step_defined_after_it(engine_client):
    transform = TransformSql(engine="spark", queries=[
        SqlQueryStep(alias="first", query="SELECT * FROM second"),
        SqlQueryStep(alias="second", query=f"SELECT * FROM {ORD}"),
        SqlQueryStep(query="SELECT * FROM first"),
    ])
    with pytest.raises(EngineError, match=r"step 0 \(first\): relation second is not a declared input"):
        validate(engine_client, transform)


ALLOWED = {
    "projection, CASE, functions": f"""
        SELECT event_time, order_id, upper(customer) AS customer,
               CASE WHEN amount >= 100 THEN 'large' WHEN amount >= 10 THEN 'medium' ELSE 'small' END AS size,
               round(amount * 1.2, 2) AS gross, coalesce(customer, '?') AS who,
               sha2(customer, 256) AS customer_hash, date_trunc('hour', event_time) AS hour,
               unix_timestamp(event_time) AS epoch, to_date(event_time) AS day
        FROM {ORD} WHERE amount > 0 AND customer LIKE 'c%'""",
    "tumbling window aggregation": f"""
        SELECT window.end AS event_time, customer, count(*) AS orders, sum(amount) AS total
        FROM {ORD} GROUP BY window(event_time, '1 hour'), customer""",
    "sliding window": f"""
        SELECT window.end AS event_time, avg(amount) AS avg_amount
        FROM {ORD} GROUP BY window(event_time, '2 hours', '1 hour')""",
    "join of two inputs": f"""
        SELECT o.event_time, o.order_id, o.amount, p.paid
        FROM {ORD} o JOIN {PAY} p ON o.order_id = p.order_id
          AND p.event_time BETWEEN o.event_time AND o.event_time + INTERVAL 1 DAY""",
    "join with an inline table": f"""
        SELECT o.event_time, o.order_id, r.region
        FROM {ORD} o JOIN (VALUES ('c1', 'north'), ('c2', 'south')) AS r(customer, region)
          ON o.customer = r.customer""",
    "CTE": f"""
        WITH big AS (SELECT * FROM {ORD} WHERE amount > 10),
             named AS (SELECT event_time, order_id, customer FROM big)
        SELECT * FROM named""",
    "subquery in FROM": f"SELECT event_time, n FROM (SELECT event_time, order_id * 2 AS n FROM {ORD}) t",
    "IN subquery over VALUES": f"""
        SELECT * FROM {ORD} WHERE customer IN (SELECT col1 FROM VALUES ('c1'), ('c2'))""",
    "union of two inputs": f"""
        SELECT event_time, order_id FROM {ORD} UNION ALL SELECT event_time, order_id FROM {PAY}""",
    "LATERAL VIEW explode": f"""
        SELECT event_time, order_id, part FROM {ORD} LATERAL VIEW explode(array(1, 2)) t AS part""",
    "stack": f"""
        SELECT event_time, order_id, stack(2, 'amount', amount, 'double', amount * 2) AS (kind, value)
        FROM {ORD}""",
    "join with range": f"SELECT o.event_time, o.order_id, r.id FROM {ORD} o JOIN range(3) r ON r.id < 2",
    "hint": f"SELECT /*+ BROADCAST(r) */ o.* FROM {ORD} o JOIN (VALUES (1)) AS r(k) ON o.order_id = r.k",
    "date and time constants": f"""
        SELECT * FROM {ORD} WHERE event_time > TIMESTAMP '2020-01-01' AND event_time > 'epoch'
          AND to_date(event_time) <> DATE '2020-01-02' AND date_add('2020-01-01', 1) < to_date(event_time)""",
    "aes_encrypt with a constant IV": f"""
        SELECT *, aes_encrypt(customer, {KEY}, 'CBC', 'PKCS', unhex('00000000000000000000000000000000')) AS s
        FROM {ORD}""",
    "steps with aliases": [
        SqlQueryStep(alias="big", query=f"SELECT * FROM {ORD} WHERE amount > 10"),
        SqlQueryStep(alias="hourly", query="SELECT window.end AS event_time, count(*) AS n "
                                           "FROM big GROUP BY window(event_time, '1 hour')"),
        SqlQueryStep(query="SELECT event_time, n FROM hourly WHERE n > 1"),
    ],
}


@pytest.mark.parametrize("query", ALLOWED.values(), ids=ALLOWED.keys())
def test_allowed(engine_client, query):
    transform = (TransformSql(engine="spark", queries=query) if isinstance(query, list)
                 else TransformSql(engine="spark", query=query))
    assert validate(engine_client, transform).schema.names[:2] == ["system_time", "event_time"]


def test_variables_are_not_substituted(make_chain):
    # ${system:...} and ${env:...} would put the machine's values into the query's text.
    chain = make_chain(f"SELECT *, '${{system:user.home}}' AS home, '${{env:HOME}}' AS env FROM {ORD}",
                       {ORDERS.dataset_id: ORDERS.schema})
    result = chain.execute({ORDERS.dataset_id: [[ORDER]]})
    assert [(r["home"], r["env"]) for r in records(result.output_path)] == [
        ("${system:user.home}", "${env:HOME}")
    ]


def test_execute_refuses_before_running(make_chain):
    chain = make_chain(f"SELECT *, rand() AS r FROM {ORD}", {ORDERS.dataset_id: ORDERS.schema})
    with pytest.raises(EngineError) as failure:
        chain.execute({ORDERS.dataset_id: [[ORDER]]})
    assert failure.value.kind is EngineErrorKind.FORBIDDEN
    assert "function rand()" in failure.value.message


def test_preprocess_reads_its_input_and_nothing_else(engine_client, engine_root):
    # A root's preprocess step runs as a batch over the view `input`: the same policy holds.
    source = engine_root.data / "preprocess-policy" / "input.parquet"
    source.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"city": ["Oslo", "Lima"]}), source)
    output = engine_root.run / "preprocess-policy.parquet"

    def preprocess(query: str) -> int:
        return engine_client.preprocess(PreprocessRequest(
            transaction_id="preprocess-policy", dataset_id="x", input_path=source,
            transform=TransformSql(engine="spark", query=query), output_path=output,
        )).num_records

    assert preprocess("SELECT upper(city) AS city FROM input") == 2
    with pytest.raises(EngineError) as failure:
        preprocess("SELECT value AS city FROM text.`/etc/hostname`")
    assert failure.value.kind is EngineErrorKind.FORBIDDEN
    assert "path relation text.`/etc/hostname`" in failure.value.message
