"""A CSV TIMESTAMP column is read in one cast when its values are alike, guessed from its
first values; a column that turns out otherwise further on reads the same as a mixed one."""
from datetime import UTC, datetime

from coordinator.ingest.read import read
from coordinator.metadata.objects import ReadStepCsv

from .conftest import write

TEN = datetime(2020, 1, 1, 10, tzinfo=UTC)


def read_times(tmp_path, values: list[str]) -> list[datetime | None]:
    text = "".join(f"{i},{v}\n" for i, v in enumerate(values))
    path = write(tmp_path / "in.csv", "i,t\n" + text)
    return read(path, ReadStepCsv(header=True, schema=["i INT", "t TIMESTAMP"]), "in.csv") \
        .column("t").to_pylist()


def test_zoneless_values_are_utc_wall_times(tmp_path):
    assert read_times(tmp_path, ["2020-01-01 10:00:00"] * 100) == [TEN] * 100


def test_zoned_values_are_converted_to_utc(tmp_path):
    assert read_times(tmp_path, ["2020-01-01T12:00:00+02:00"] * 100) == [TEN] * 100


def test_a_zoned_value_after_many_zoneless_ones_is_converted(tmp_path):
    values = ["2020-01-01 10:00:00"] * 100 + ["2020-01-01T11:00:00+01:00"]
    assert read_times(tmp_path, values) == [TEN] * 101


def test_a_zoneless_value_after_many_zoned_ones_is_a_utc_wall_time(tmp_path):
    values = ["2020-01-01T10:00:00Z"] * 100 + ["2020-01-01 10:00:00", "2020-01-01"]
    assert read_times(tmp_path, values) == [TEN] * 101 + [datetime(2020, 1, 1, tzinfo=UTC)]


def test_nulls_before_the_first_value_do_not_decide(tmp_path):
    values = [""] * 100 + ["2020-01-01T10:00:00Z"]
    assert read_times(tmp_path, values) == [None] * 100 + [TEN]
