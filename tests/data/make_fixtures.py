"""Write one real fixture file per format, each made by an independent writer.

python-docx (.docx), odfpy (.odt), openpyxl (.xlsx), xlwt (.xls), fpdf2 (.pdf; scanned pages are
PIL-rendered images placed by fpdf2), espeak-ng + ffmpeg (.wav/.mp3), zipfile (.zip). Plain-text
formats (.md .rst .html .svg .rtf .tex .csv .json .py) are written out as the text a person would
type. Used by the extractor tests through a session fixture; also runnable by hand:

    .venv/bin/python tests/data/make_fixtures.py OUTDIR
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

# Words the tests look for: each fixture carries distinctive ones.
MD = """# Solar Panels

Photovoltaic cells convert sunlight into electricity. Efficiency depends on temperature.

## Installation Notes

Mount the panels facing south at a tilt equal to the latitude. Use stainless bolts.

Setext Heading
--------------

The inverter converts direct current into alternating current.

```
# not a heading inside a fence
```
"""

RST = """Bicycle Maintenance
===================

Keep the chain clean and lubricated every two hundred kilometres.

Brakes
------

Replace brake pads when the groove disappears.
"""

HTML = """<!DOCTYPE html>
<html><head><title>Volcano Field Guide</title>
<style>body { color: red } .secretstyle {}</style>
<script>var trackingPixel = "SHOULD_NOT_APPEAR";</script>
</head><body>
<noscript>Enable JavaScript NOSCRIPT_TEXT</noscript>
<h1>Basalt Flows</h1>
<p>Basalt lava flows are <b>fluid</b> and travel <a href="#">long distances</a>.</p>
<h2>Pyroclastic Density Currents</h2>
<div>Pyroclastic currents move fast and are deadly.<p>Evacuation is the only defence.</p></div>
<ul><li>Helmet</li><li>Gas mask</li></ul>
</body></html>
"""

SVG = """<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="200" height="100">
  <title>Migration Diagram</title>
  <desc>Arctic tern migration route</desc>
  <style>.label { font: 12px sans-serif; }</style>
  <rect width="200" height="100" fill="white"/>
  <text x="10" y="20" class="label">Greenland breeding grounds</text>
  <text x="10" y="60"><tspan>Antarctic</tspan> <tspan>feeding waters</tspan></text>
</svg>
"""

RTF = r"""{\rtf1\ansi\deff0 {\fonttbl {\f0 Times New Roman;}}
{\pard\b Lighthouse Keeping\b0\par}
{\pard The lighthouse lamp must be trimmed at dusk. Fresnel lenses focus the beam.\par}
}
"""

TEX = r"""\documentclass{article}
\title{Glacier Dynamics}
\begin{document}
\maketitle
\section{Ice Flow}
Glaciers deform under their own weight; basal sliding adds to the motion.
\subsection{Crevasses}
Crevasses open where the ice is under tension, e.g.\ at a bend.
\input{/etc/passwd}
$E = mc^2$ is unrelated.
\end{document}
"""

CSV = """city;country;population;river
Vienna;Austria;1900000;Danube
Budapest;Hungary;1750000;Danube
"Cologne; Rhine city";Germany;1080000;Rhine
"""

JSON_DOC = {"recipe": "Sourdough bread", "ingredients": ["flour", "water", "salt", "levain"],
            "steps": {"autolyse": "30 minutes", "bulk": "5 hours"}, "hydration": 0.75, "vegan": True}

PY = '''"""Module computing orbital periods."""


def kepler_period(semi_major_axis_au: float) -> float:
    """Kepler's third law: period in years."""
    return semi_major_axis_au ** 1.5
'''

SPEECH = "The quarterly budget meeting discussed solar panels and bicycle lanes."

PDF_PAGES = [
    "Chapter one describes the migration of humpback whales along the Pacific coast.",
    "Chapter two explains how krill populations depend on sea ice in the Southern Ocean.",
    "Chapter three summarises the acoustic songs recorded by hydrophones near Hawaii.",
]
SCAN_TEXT = ["Scanned invoice number 4471", "Total amount due: seventy dollars", "Payment terms thirty days"]


def _pdf_text(path: Path, pages: list[str]) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def _text_image(lines: list[str]):
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L", (1700, 2200), 255)
    draw = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 56)
    except OSError:
        font = ImageFont.load_default(size=56)
    for i, line in enumerate(lines):
        draw.text((120, 200 + i * 110), line, fill=0, font=font)
    return img


def _pdf_scanned(path: Path, pages: list) -> None:
    """pages: str -> typed page, list[str] -> scanned page (an image, no text layer)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for p in pages:
        pdf.add_page()
        if isinstance(p, str):
            pdf.multi_cell(0, 8, p)
        else:
            buf = io.BytesIO()
            _text_image(p).save(buf, format="PNG")
            buf.seek(0)
            pdf.image(buf, x=0, y=0, w=210)
    pdf.output(str(path))


def _pdf_encrypted(path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_encryption(owner_password="owner-secret", user_password="user-secret")
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Confidential merger plans for the lighthouse company.")
    pdf.output(str(path))


def make_big_pdf(path: Path, pages: int = 400) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=10)
    para = ("Sediment cores from the lake bed record ten thousand years of pollen, charcoal and "
            "volcanic ash; each layer is dated by radiocarbon and counted varves. ")
    for i in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 5, f"Page {i + 1}. " + para * 12)
    pdf.output(str(path))
    return path


def _docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Beekeeping Handbook", level=1)
    d.add_paragraph("Honey bees forage within three kilometres of the hive.")
    d.add_heading("Swarm Control", level=2)
    d.add_paragraph("Inspect the brood frames weekly for queen cells in spring.")
    table = d.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text = "Varroa"
    table.rows[0].cells[1].text = "Oxalic acid treatment"
    d.save(str(path))


def _odt(path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.text import H, P, S

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text="Orchard Pruning"))
    doc.text.addElement(P(text="Prune apple trees in late winter while they are dormant."))
    doc.text.addElement(H(outlinelevel=2, text="Tools"))
    p = P(text="Use sharp")
    p.addElement(S(c=1))
    p.addText("bypass secateurs and a pruning saw.")
    doc.text.addElement(p)
    doc.save(str(path))


def _xlsx(path: Path) -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Inventory"
    ws.append(["item", "quantity", "warehouse"])
    ws.append(["anchor chain", 12, "Rotterdam"])
    ws.append(["mooring buoy", 3, "Antwerp"])
    ws2 = wb.create_sheet("Suppliers")
    ws2.append(["name", "country"])
    for i in range(45):
        ws2.append([f"supplier{i}", "Norway" if i % 2 else "Denmark"])
    wb.save(str(path))


def _xls(path: Path) -> None:
    import xlwt

    wb = xlwt.Workbook()
    ws = wb.add_sheet("Telescopes")
    for r, row in enumerate([["model", "aperture_mm"], ["Dobsonian reflector", 254], ["Apochromatic refractor", 102]]):
        for c, v in enumerate(row):
            ws.write(r, c, v)
    wb.save(str(path))


def speech_files(out: Path) -> dict[str, Path]:
    """espeak-ng speaks SPEECH to a WAV; ffmpeg makes MP3 and M4A copies. Needs both binaries."""
    wav, mp3 = out / "speech.wav", out / "speech.mp3"
    subprocess.run(["espeak-ng", "-s", "150", "-w", str(wav), SPEECH], check=True, capture_output=True)
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-i", str(wav), str(mp3)], check=True)
    return {"wav": wav, "mp3": mp3}


def make_all(out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    f: dict[str, Path] = {}

    def text(name: str, body: str, key: str | None = None) -> None:
        p = out / name
        p.write_text(body, encoding="utf-8")
        f[key or name] = p

    text("notes.md", MD, "md")
    text("guide.rst", RST, "rst")
    text("page.html", HTML, "html")
    text("diagram.svg", SVG, "svg")
    text("lighthouse.rtf", RTF, "rtf")
    text("glacier.tex", TEX, "tex")
    text("cities.csv", CSV, "csv")
    text("recipe.json", json.dumps(JSON_DOC), "json")
    text("kepler.py", PY, "py")
    text("plain.txt", "Tidal energy is predictable because tides follow the moon.\n", "txt")
    (out / "bom.txt").write_bytes(b"\xef\xbb\xbfByte order mark stripped here.\n")
    f["bom"] = out / "bom.txt"
    (out / "invalid_utf8.txt").write_bytes(b"Caf\xe9 au lait costs \xff\xfe three euros in Montr\xe9al.\n")
    f["invalid_utf8"] = out / "invalid_utf8.txt"
    (out / "empty.txt").write_bytes(b"")
    f["empty"] = out / "empty.txt"
    text("blank.md", "   \n\n\t\n", "blank")
    text("broken.json", '{"a": [1, 2,, 3]}', "broken_json")
    # a real binary (a PNG written by Pillow) renamed to .txt
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (200, 30, 30)).save(buf, format="PNG")
    (out / "picture.txt").write_bytes(buf.getvalue())
    f["binary_txt"] = out / "picture.txt"
    (out / "picture.png").write_bytes(buf.getvalue())
    f["png"] = out / "picture.png"

    _pdf_text(out / "whales.pdf", PDF_PAGES)
    f["pdf"] = out / "whales.pdf"
    _pdf_scanned(out / "scanned.pdf", [SCAN_TEXT])
    f["pdf_scanned"] = out / "scanned.pdf"
    _pdf_scanned(out / "mixed.pdf", [PDF_PAGES[0], SCAN_TEXT])
    f["pdf_mixed"] = out / "mixed.pdf"
    _pdf_encrypted(out / "encrypted.pdf")
    f["pdf_encrypted"] = out / "encrypted.pdf"
    data = (out / "whales.pdf").read_bytes()
    (out / "truncated.pdf").write_bytes(data[: len(data) // 3])
    f["pdf_truncated"] = out / "truncated.pdf"

    _docx(out / "bees.docx")
    f["docx"] = out / "bees.docx"
    data = (out / "bees.docx").read_bytes()
    (out / "truncated.docx").write_bytes(data[: len(data) // 2])
    f["docx_truncated"] = out / "truncated.docx"
    _odt(out / "orchard.odt")
    f["odt"] = out / "orchard.odt"
    _xlsx(out / "inventory.xlsx")
    f["xlsx"] = out / "inventory.xlsx"
    _xls(out / "telescopes.xls")
    f["xls"] = out / "telescopes.xls"

    # an archive holding text, a PDF, an unknown binary and a nested zip with a docx
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(out / "bees.docx", "docs/bees.docx")
    with zipfile.ZipFile(out / "bundle.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.write(out / "notes.md", "notes/notes.md")
        z.write(out / "whales.pdf", "whales.pdf")
        z.write(out / "picture.png", "img/picture.png")
        z.writestr("nested/inner.zip", inner.getvalue())
    f["zip"] = out / "bundle.zip"
    return f


if __name__ == "__main__":
    dest = Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures-out")
    files = make_all(dest)
    if shutil.which("espeak-ng") and shutil.which("ffmpeg"):
        files.update(speech_files(dest))
    make_big_pdf(dest / "big.pdf")
    for k, p in sorted(files.items()):
        print(f"{k:16s} {p} {p.stat().st_size} bytes")
