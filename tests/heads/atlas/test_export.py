"""The atlas on disk: the JSON documents against their JSON Schemas, the CSV against the atlas's
own numbers, and the command line end to end."""

import io
import json

import jsonschema
import numpy as np
import pandas as pd
import pytest

from models.head import Head
from models.heads.__main__ import main
from models.heads.atlas.card import ComponentView, HeadCard, SpaceView, TokenLoad, head_card
from models.heads.atlas.export import (
    SCHEMAS,
    atlas_json,
    atlas_table,
    card_json,
    components_csv,
    write_atlas,
)
from models.heads.atlas.metrics import METRIC_NAMES


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def validator(name: str) -> jsonschema.Draft202012Validator:
    found = schema(name)
    jsonschema.Draft202012Validator.check_schema(found)
    return jsonschema.Draft202012Validator(found)


def test_the_documents_follow_their_schemas(atlas):
    document = json.loads(json.dumps(atlas_json(atlas), allow_nan=False))
    validator("atlas").validate(document)
    cards = validator("card")
    for head in (Head(0, 0), Head(2, 3)):
        cards.validate(json.loads(json.dumps(card_json(atlas, head_card(atlas, head)))))


def test_the_schemas_refuse_what_is_wrong(atlas):
    document = json.loads(json.dumps(atlas_json(atlas)))
    document["heads"][0]["values"]["no_such_metric"] = 1.0
    with pytest.raises(jsonschema.ValidationError):
        validator("atlas").validate(document)
    card = json.loads(json.dumps(card_json(atlas, head_card(atlas, Head(1, 1)))))
    card["samples"][0]["decile"] = 11
    with pytest.raises(jsonschema.ValidationError):
        validator("card").validate(card)


def test_the_head_entries_carry_the_atlas_numbers(atlas):
    heads = atlas_json(atlas)["heads"]
    entry = heads[2 * 4 + 1]  # 2.1
    assert entry["head"] == "2.1" and (entry["layer"], entry["index"]) == (2, 1)
    sink = atlas.measures["sink"]
    assert entry["values"]["sink"] == pytest.approx(sink.values[2, 1])
    assert entry["se"]["sink"] == pytest.approx(sink.se[2, 1])
    assert entry["rank"]["sink"] == sink.ranks()[2, 1]
    assert entry["values"]["zero_ablation"] is None and entry["se"]["ov_copying"] is None


def test_the_table_has_every_value_error_and_rank(atlas):
    table = pd.read_csv(io.StringIO(atlas_table(atlas).to_csv(index=False)))
    assert len(table) == 12 and table["L.H"].tolist()[:2] == [0.0, 0.1]
    for name in METRIC_NAMES:
        if name in ("layer", "head_index"):
            continue
        measure = atlas.measures[name]
        np.testing.assert_allclose(table[name], measure.values.ravel(), equal_nan=True)
        ranks = measure.ranks().ravel()
        np.testing.assert_array_equal(table[f"{name}_rank"].fillna(0), ranks)
    np.testing.assert_allclose(table["entropy_se"], atlas.measures["entropy"].se.ravel())
    assert table["ov_copying_se"].isna().all()


def test_token_cells_cannot_run_as_formulas():
    load = TokenLoad(text=0, position=1, token="=cmd|' /C calc'!A0", loading=1.5)
    view = SpaceView("key", None, 3, (ComponentView(0, 0.5, (load,), ()),))
    card = HeadCard(Head(0, 0), (), (), (), (), (view,))
    text = components_csv([card])
    assert "'=cmd" in text and "\n0.0,key,,1,0.5,positive,1,0,1,'=cmd" in text


def test_the_command_line_writes_the_atlas(bundled, tmp_path, capsys):
    corpus = tmp_path / "texts.txt"
    corpus.write_text(
        "x = 1\nprint(x)\n\nimport os\nprint(os.sep)\n\nfor i in range(3):\n    pass\n"
    )
    out = tmp_path / "atlas"
    args = ["bundled", "--corpus", str(corpus), "--seq-len", "8", "--batch", "2"]
    code = main(["atlas", *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0 and "[atlas]" in err and "MiB" in err
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert written == sorted(
        ["atlas.csv", "atlas.json", "components.csv", "samples.csv"]
        + [f"cards/L{layer}H{head}.json" for layer in range(3) for head in range(4)]
    )
    document = json.loads((out / "atlas.json").read_text(encoding="utf-8"))
    validator("atlas").validate(document)
    assert document["corpus"]["name"] == "texts.txt" and len(document["corpus"]["texts"]) == 3
    validator("card").validate(json.loads((out / "cards/L2H1.json").read_text(encoding="utf-8")))
    table = pd.read_csv(out / "atlas.csv")
    assert {"entropy", "entropy_se", "distance_rank", "not_applicable"} <= set(table.columns)
    samples = pd.read_csv(out / "samples.csv", keep_default_na=False)
    assert set(samples["decile"]) <= set(range(1, 11)) and len(samples) == 12 * 3


def test_the_command_line_refuses_a_file_as_directory(tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("")
    with pytest.raises(SystemExit) as stop:
        main(["atlas", "bundled", "--out", str(target)])
    assert stop.value.code == 2 and "is a file" in capsys.readouterr().err


def test_write_atlas_returns_what_it_wrote(atlas, tmp_path):
    written = write_atlas(atlas, tmp_path / "out")
    assert all(p.is_file() for p in written) and len(written) == 4 + 12


def test_the_scatter_of_the_real_atlas_shows_its_table(atlas):
    from viz.atlas_figures import atlas_scatter

    frame = atlas_table(atlas)
    fig = atlas_scatter(frame, "entropy", "previous_token", colour="ov_copying", size="activation")
    trace = fig.data[0]
    np.testing.assert_array_equal(trace.x, frame["entropy"])
    np.testing.assert_array_equal(trace.y, frame["previous_token"])
    np.testing.assert_array_equal(trace.error_y.array, frame["previous_token_se"])
    np.testing.assert_array_equal(trace.marker.color, frame["ov_copying"])
    flagged = [row[0] for row, symbol in zip(trace.customdata, trace.marker.symbol, strict=True)]
    marked = {h for h, s in zip(flagged, trace.marker.symbol, strict=True) if s == "diamond"}
    assert marked == {str(h) for h in frame["L.H"][frame["flags"] != ""]}
