"""Spreadsheets: .xlsx (openpyxl read-only), .xls (xlrd), .csv/.tsv (csv module, dialect sniffed).

Each sheet starts with a ``# Sheet: NAME`` line; rows are tab-separated cell values, one line each
(a cell's own line breaks become spaces). Runs of consecutive non-empty rows, at most ROW_BLOCK, are
regions ``{"sheet", "row_start", "row_end"}`` (1-based spreadsheet row numbers; a CSV has no sheet),
so a cited chunk says where in the workbook it came from: the chunker counts the lines of a run to
name exactly the rows the chunk holds, and never lets a chunk run from one sheet into the next.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import zipfile
from pathlib import Path
from typing import Any, Iterable

from ragweedd.errors import ExtractionError, ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, ToolRequirement
from ragweedd.extract.office import _check_zip
from ragweedd.extract.sniff import decode_text, looks_binary, read_head, require_nonempty
from ragweedd.extract.tables import RowRuns, SheetColumns, sheet_columns, sheet_row_line
from ragweedd.extract.text_builder import TextBuilder, finish

ROW_BLOCK = 20
PROBE_ROWS = 12


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    return " ".join(str(v).split())


def _add_sheet(tb: TextBuilder, sheet: str | None, rows: Iterable[tuple[int, Iterable[Any]]]) -> int:
    """Append one sheet; returns the number of non-empty rows. A run of consecutive rows (an empty
    row, left out, ends it) is read as a table: its title and header rows, judged from its first
    PROBE_ROWS rows, are not lines of their own; every other row is one line that says its label
    and, for each value, its column's header. Lines go in blocks of consecutive rows, at most
    ROW_BLOCK: the chunker counts lines inside a block to cite the exact rows of a chunk."""
    count = 0
    prev = 0
    run: list[tuple[int, list[str]]] = []  # the first rows of the current run, until it is laid out
    cols: SheetColumns | None = None
    lines: RowRuns | None = None  # the laid-out run's lines

    def flush() -> None:
        if lines is not None:
            lines.flush()

    def emit(n: int, cells: list[str]) -> None:
        assert cols is not None and lines is not None
        lines.add(n, sheet_row_line(cells, cols))

    def lay_out_run() -> None:
        nonlocal cols, lines
        flush()
        cols = sheet_columns([c for _, c in run])
        named = sheet and cols.title and sheet.casefold() in cols.title.casefold()
        title = cols.title if named else " — ".join(t for t in (sheet, cols.title) if t)
        meta: dict[str, Any] = {}
        if sheet is not None:
            meta["sheet"] = sheet
        if title:
            meta["table_title"] = title
        lines = RowRuns(tb, meta, max_rows=ROW_BLOCK)
        if cols.title:
            # the title rows' text stays in the sheet's text, once, before the rows it names
            tb.add(cols.title, {"sheet": sheet} if sheet is not None else None, sep="\n")
        for n, cells in run[cols.body:]:
            emit(n, cells)
        run.clear()

    for n, values in rows:
        cells = [_cell(v) for v in values]
        while cells and not cells[-1]:
            cells.pop()
        if not any(cells):
            continue
        if count == 0 and sheet is not None:
            # the heading only for sheets with values: an empty workbook must not look like text
            tb.add(f"# Sheet: {sheet}", {"sheet": sheet}, sep="\n\n")
        if prev and n != prev + 1:
            if cols is None:
                lay_out_run()  # a run shorter than the probe
            flush()
            cols = None  # a row was empty: the next row starts a new run, with headers of its own
        prev = n
        count += 1
        if cols is None:
            run.append((n, cells))
            if len(run) >= PROBE_ROWS:
                lay_out_run()
        else:
            emit(n, cells)
    if cols is None and run:
        lay_out_run()
    flush()
    return count


class XlsxExtractor:
    name = "xlsx"
    extensions = (".xlsx", ".xlsm")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        import openpyxl

        require_nonempty(path)
        _check_zip(path, settings, ".xlsx")
        try:
            wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
        except (zipfile.BadZipFile, KeyError, OSError) as e:
            raise ExtractionError(f"{path}: not a valid .xlsx workbook ({type(e).__name__}: {e})",
                                  hint="re-save it from the spreadsheet application") from None
        except Exception as e:  # noqa: BLE001 - openpyxl raises many types for malformed parts
            raise ExtractionError(f"{path}: could not read .xlsx ({type(e).__name__}: {e})") from None
        tb = TextBuilder()
        try:
            for ws in wb.worksheets:
                _add_sheet(tb, ws.title, ((i, row) for i, row in enumerate(ws.iter_rows(values_only=True), 1)))
        except Exception as e:  # noqa: BLE001
            raise ExtractionError(f"{path}: damaged worksheet data ({type(e).__name__}: {e})") from None
        finally:
            wb.close()
        return finish(ExtractedDoc(text=tb.text(), regions=tb.regions, extractor=self.name), path, "cell values")

    def requirements(self) -> list[ToolRequirement]:
        return [ToolRequirement("openpyxl", "openpyxl (PyPI)", optional=False, kind="python")]


class XlsExtractor:
    name = "xls"
    extensions = (".xls",)

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        import xlrd

        require_nonempty(path)
        try:
            book = xlrd.open_workbook(str(path), on_demand=True)
        except xlrd.XLRDError as e:
            raise ExtractionError(f"{path}: not a readable .xls workbook ({e})",
                                  hint=".xlsx files renamed to .xls are refused; rename them back") from None
        except Exception as e:  # noqa: BLE001 - xlrd raises struct/Assertion errors on truncated files
            raise ExtractionError(f"{path}: damaged .xls workbook ({type(e).__name__}: {e})") from None
        tb = TextBuilder()
        try:
            for i in range(book.nsheets):
                sh = book.sheet_by_index(i)
                rows = ((r + 1, _xls_row(book, sh, r)) for r in range(sh.nrows))
                _add_sheet(tb, sh.name, rows)
                book.unload_sheet(i)
        except Exception as e:  # noqa: BLE001
            raise ExtractionError(f"{path}: damaged .xls sheet data ({type(e).__name__}: {e})") from None
        finally:
            book.release_resources()
        return finish(ExtractedDoc(text=tb.text(), regions=tb.regions, extractor=self.name), path, "cell values")

    def requirements(self) -> list[ToolRequirement]:
        return [ToolRequirement("xlrd", "xlrd (PyPI)", optional=False, kind="python")]


def _xls_row(book: Any, sh: Any, r: int) -> list[Any]:
    import xlrd

    out = []
    for c in sh.row(r):
        if c.ctype == xlrd.XL_CELL_DATE:
            try:
                out.append(xlrd.xldate.xldate_as_datetime(c.value, book.datemode))
                continue
            except Exception:  # noqa: BLE001 - out-of-range dates stay numbers
                pass
        out.append(c.value)
    return out


class CsvExtractor:
    name = "csv"
    extensions = (".csv", ".tsv", ".tab")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        why = looks_binary(read_head(path))
        if why:
            raise ExtractionSkipped(f"binary file {path}: {why}; not CSV")
        text = decode_text(path.read_bytes())
        sample = text[:65536]
        try:
            dialect: Any = csv.Sniffer().sniff(sample, delimiters=",;\t|:")
        except csv.Error:
            dialect = csv.excel_tab if path.suffix.lower() in (".tsv", ".tab") else csv.excel
        csv.field_size_limit(16 * 1024 * 1024)
        reader = csv.reader(io.StringIO(text, newline=""), dialect)
        tb = TextBuilder()
        try:
            # reader.line_num counts physical lines (quoted newlines included), which is what a user
            # sees in an editor, but spreadsheets count records: cite records (row 1 = header)
            _add_sheet(tb, None, ((i, row) for i, row in enumerate(reader, 1)))
        except csv.Error as e:
            raise ExtractionError(f"{path}: malformed CSV at line {reader.line_num}: {e}") from None
        return finish(ExtractedDoc(text=tb.text(), regions=tb.regions, extractor=self.name), path, "values")

    def requirements(self) -> list[ToolRequirement]:
        return []
