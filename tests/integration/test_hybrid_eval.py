"""`ragweedd eval beir` on a small BEIR-layout dataset written by the test, and its bad inputs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragweedd.errors import NotFoundError, RequestError  # noqa: E402
from ragweedd.eval import beir  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = {
    "d1": ("Mitochondria", "Mitochondria make ATP by oxidative phosphorylation."),
    "d2": ("Ribosomes", "Ribosomes translate messenger RNA into proteins."),
    "d3": ("Telomeres", "Telomeres shorten with every division of somatic cells."),
    "d/4": ("Odd id", "Chloroplasts capture light for photosynthesis in plants."),
    "d5": ("Noise", "Weather reports mention rain and wind on Tuesday."),
}
QUERIES = {"q1": "oxidative phosphorylation ATP", "q2": "messenger RNA translation", "q3": "telomeres shorten",
           "q4": "photosynthesis chloroplasts light", "q9": "unjudged query"}
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q3", "d3", 1), ("q4", "d/4", 2)]


def write_dataset(d: Path, qrels=QRELS, corpus_extra=""):
    (d / "qrels").mkdir(parents=True)
    (d / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n"
                                            for k, (t, x) in CORPUS.items()) + corpus_extra)
    (d / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items()))
    (d / "qrels" / "train.tsv").write_bytes(
        ("query-id\tcorpus-id\tscore\r\n" + "".join(f"{q}\t{c}\t{s}\r\n" for q, c, s in qrels)).encode())
    return d


@pytest.fixture
def conf(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(f'data_dir="{tmp_path}/data"\nstate_dir="{tmp_path}/state"\ncache_dir="{tmp_path}/cache"\n'
                 'log_level="warning"\n[embed]\nmodel="hash:64"\n')
    return p


def cli(conf, *args):
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(conf), "eval", "beir", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_eval_cli_json_and_table(tmp_path, conf):
    ds = write_dataset(tmp_path / "mini")
    # rrf: with the hashing test embedder the dense leg is noise, and rank fusion keeps the keyword
    # leg's perfect order on top (score fusion gives noise its configured weight)
    out = cli(conf, str(ds), "--json", "--fusion", "rrf")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["fusion"] == "rrf"
    assert res["queries"] == 4 and res["documents"] == 5 and set(res["modes"]) == {"dense", "keyword", "hybrid"}
    kw = res["modes"]["keyword"]["metrics"]
    assert kw["ndcg@10"]["mean"] == pytest.approx(1.0) and kw["mrr@10"]["mean"] == pytest.approx(1.0)
    assert kw["recall@100"]["mean"] == pytest.approx(1.0) and kw["map"]["mean"] == pytest.approx(1.0)
    assert res["modes"]["hybrid"]["metrics"]["ndcg@10"]["mean"] == pytest.approx(1.0)
    for m in res["modes"].values():
        for v in m["metrics"].values():
            assert v["lo"] <= v["mean"] <= v["hi"] and v["queries"] == 4
    # the second run reuses the scratch collection and prints the table
    out = cli(conf, str(ds), "--limit", "2", "--modes", "keyword")
    assert out.returncode == 0, out.stderr
    assert "keyword" in out.stdout and "ndcg@10" in out.stdout and "2 queries" in out.stdout


@pytest.mark.parametrize("setup, args, message", [
    (lambda d: None, [], "does not exist"),
    (lambda d: write_dataset(d), ["--split", "test"], "splits present: train"),
    (lambda d: write_dataset(d, corpus_extra="{not json\n"), [], "corpus.jsonl:6: not a JSON object"),
    (lambda d: write_dataset(d, qrels=QRELS + [("qX", "d1", 1)]), [], "not in queries.jsonl"),
    (lambda d: write_dataset(d), ["--modes", "dense,fuzzy"], "fuzzy"),
    (lambda d: write_dataset(d), ["--limit", "0"], "--limit"),
    (lambda d: write_dataset(d), ["--split", "../x"], "not a split name"),
])
def test_eval_bad_inputs_exit_with_a_message(tmp_path, conf, setup, args, message):
    d = tmp_path / "ds"
    setup(d)
    out = cli(conf, str(d), *args)
    assert out.returncode != 0
    assert message in out.stderr and "Traceback" not in out.stderr


def test_qrels_row_errors_name_the_line(tmp_path):
    d = write_dataset(tmp_path / "ds")
    (d / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\n")
    with pytest.raises(RequestError, match=r"train.tsv:2"):
        beir.load(d)
    with pytest.raises(NotFoundError):
        beir.load(tmp_path / "nowhere")


def test_file_names_map_back_to_ids():
    assert beir.file_name("123") == "123.txt"
    odd = beir.file_name("d/4")
    assert "/" not in odd and odd.endswith(".txt") and odd != beir.file_name("d/5")
    assert beir.file_name("..") != "...txt"
