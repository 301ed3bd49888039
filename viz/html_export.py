""" "Download this view as HTML": one self-contained file that opens anywhere, offline.

The file holds the all-heads grid (PNG data URIs), the chosen head's heatmap (a plotly figure with
plotly.js inlined: no CDN), the token strip and a caption saying what it shows. It makes no
request of any kind: no external script, font, stylesheet or image, and a Content-Security-Policy
that forbids the page from fetching anything should a later change try.

Everything that comes from a person (prompt, tokens, model name, settings, link) is escaped with
:func:`html.escape`. The builder takes plain values (PNG bytes, a figure built from a detail
window, token labels and weights, strings), never a model. At 2,048 tokens the file stays in
single megabytes because it holds the detail window and pooled pictures, not ``n x n`` patterns;
:func:`export_size` states the size before the file is built.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import plotly
import plotly.graph_objects as go
from jaxtyping import Float

from models.capture.spans import Direction
from models.errors import UserError
from viz.heatmap import HeatmapData
from viz.token_view import legend_html, token_spans

PROMPT_CHARS = 1_200
MAX_HEATMAP_CELLS = 320 * 320
CELL_BYTES = 11.0  # z and customdata as base64 float32 (2 x 4 x 4/3 bytes) plus slack
STRIP_BYTES = 150  # one escaped token span without its text
BASE_BYTES = 24_000  # page frame, styles, plotly's template and config
CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    "script-src 'unsafe-inline'; connect-src 'none'; font-src 'none'; form-action 'none'"
)
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;
max-width:1200px}
h1{font-size:20px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px}
.caption{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:4px 16px;margin:0}
.caption dt{font-weight:600;white-space:nowrap;align-self:start}
.caption dd{margin:0;overflow-wrap:anywhere}
.prompt{white-space:pre-wrap;background:#f6f6f6;padding:6px 8px;border-radius:4px}
table.grid{border-collapse:collapse}table.grid td{padding:2px;text-align:center;font-size:11px}
table.grid img{display:block;image-rendering:pixelated;border:2px solid transparent}
table.grid img.sel{border-color:#e4572e}
table.grid .cell{position:relative;display:inline-block}
table.grid .badge{position:absolute;top:3px;left:3px;padding:0 2px;border-radius:2px;
font:bold 9px/1.3 ui-monospace,Menlo,Consolas,monospace;color:#b03a2e;
background:rgba(255,255,255,.85)}
.strip{overflow-wrap:anywhere}
.strip{line-height:2;font:13px/2 ui-monospace,Menlo,Consolas,monospace}
.tok{padding:1px 2px;margin:0 1px;border-radius:3px;white-space:pre-wrap}
.tok.sel{outline:2px solid #e4572e}
"""


Mark = tuple[str, str]  # a head's letters ("IP") and what they mean ("induction, previous token")


class ExportTooLarge(UserError):
    """The heatmap window is too large for a portable file."""

    level = "warning"


@dataclass(frozen=True)
class Caption:
    """What the exported view shows.

    Attributes:
        model: the model's name.
        prompt: the prompt (truncated to :data:`PROMPT_CHARS` characters in the file).
        layer, head: the chosen head.
        settings: further choices shown, such as ``{"colour scale": "sqrt"}``.
        link: the app link that reopens this view (an ``http(s)`` link becomes clickable).
    """

    model: str
    prompt: str
    layer: int
    head: int
    settings: Mapping[str, str] = field(default_factory=dict)
    link: str = ""


@dataclass(frozen=True)
class Strip:
    """The token strip: labels, one weight per label (NaN: masked), selection, direction, and
    whether the weights are a linear layer's signed mixing entries."""

    tokens: Sequence[str]
    weights: Float[np.ndarray, " pos"]
    selected: int | None
    direction: Direction
    signed: bool = False


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The installed plotly package's own plotly.min.js."""
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return path.read_text(encoding="utf-8")


def heatmap_cells(fig: go.Figure) -> int:
    return int(sum(np.size(trace.z) for trace in fig.data if getattr(trace, "z", None) is not None))


def heatmap_extent(heatmap: go.Figure | HeatmapData) -> tuple[int, list[str]]:
    """Cells and axis labels of the heatmap a file will hold (for :func:`export_size`): a
    detail heatmap's data, or a figure already built (compare mode's A − B)."""
    if isinstance(heatmap, HeatmapData):
        return heatmap.cells, heatmap.row_labels + heatmap.col_labels
    labels = [
        str(x)
        for trace in heatmap.data
        for axis in (trace.x, trace.y)
        for x in (axis if axis is not None else [])
    ]
    return heatmap_cells(heatmap), labels


def png_uri(picture: bytes | str) -> str:
    """A PNG as a data URI (data URIs pass through; anything else is refused)."""
    if isinstance(picture, bytes):
        return "data:image/png;base64," + base64.b64encode(picture).decode("ascii")
    if not picture.startswith("data:image/png;base64,"):
        raise ValueError("grid pictures must be PNG bytes or PNG data URIs")
    return picture


def _caption_html(caption: Caption) -> str:
    prompt = caption.prompt
    if len(prompt) > PROMPT_CHARS:
        prompt = f"{prompt[:PROMPT_CHARS]}… ({len(caption.prompt):,} characters in all)"
    rows = [
        ("model", html.escape(caption.model)),
        ("head", f"{caption.layer}.{caption.head} (layer {caption.layer}, head {caption.head})"),
        ("prompt", f'<div class="prompt">{html.escape(prompt)}</div>'),
    ]
    rows += [(html.escape(str(k)), html.escape(str(v))) for k, v in caption.settings.items()]
    if caption.link:
        link = html.escape(caption.link, quote=True)
        shown = (
            f'<a href="{link}" rel="noopener noreferrer">{link}</a>'
            if caption.link.startswith(("http://", "https://"))
            else link
        )
        rows.append(("link", shown))
    body = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<dl class="caption">{body}</dl>'


def _grid_cell(picture: bytes | str, layer: int, head: int, selected: bool, mark: Mark) -> str:
    if not picture:  # a layer with fewer heads than the widest ends in empty cells
        return "<td></td>"
    letters, words = mark
    name = f"head {layer}.{head}" + (f": {words}" if words else "")
    image = (
        f'<img src="{png_uri(picture)}" width="56" height="56" alt="{html.escape(name)}" '
        f'title="{html.escape(name)}"{" class=sel" if selected else ""}>'
    )
    badge = f'<span class="badge">{html.escape(letters)}</span>' if letters else ""
    return f'<td><span class="cell">{image}{badge}</span></td>'


def _grid_html(
    grid: Sequence[Sequence[bytes | str]],
    selected: tuple[int, int],
    marks: Mapping[tuple[int, int], Mark],
) -> str:
    header = "".join(f"<td>{h}</td>" for h in range(len(grid[0]) if grid else 0))
    rows = [f"<tr><td></td>{header}</tr>"]
    for layer, pictures in enumerate(grid):
        cells = "".join(
            _grid_cell(pic, layer, h, (layer, h) == selected, marks.get((layer, h), ("", "")))
            for h, pic in enumerate(pictures)
        )
        rows.append(f"<tr><td>{layer}</td>{cells}</tr>")
    return f'<table class="grid">{"".join(rows)}</table>'


def _marks_legend(marks: Mapping[tuple[int, int], Mark]) -> str:
    """What the letters on the pictures mean (each letter once)."""
    meaning: dict[str, str] = {}
    for letters, words in marks.values():
        for letter, word in zip(letters, words.split(", "), strict=False):
            meaning.setdefault(letter, word)
    if not meaning:
        return ""
    said = "; ".join(f"{html.escape(k)}: {html.escape(v)}" for k, v in sorted(meaning.items()))
    return (
        '<p class="marks">Letters on a picture: what this prompt\'s scores mark the head as '
        f"({said}).</p>"
    )


def view_html(
    caption: Caption,
    grid: Sequence[Sequence[bytes | str]],
    heatmap: go.Figure,
    strip: Strip,
    title: str = "Attention Atlas",
    marks: Mapping[tuple[int, int], Mark] | None = None,
) -> str:
    """The whole file.

    Args:
        caption: what the view shows.
        grid: ``layer x head`` PNG pictures (bytes or data URIs), e.g. from
            :func:`viz.thumbnails.pooled_png`; an empty one stands for a head the layer does
            not have (its row is shorter than the widest).
        heatmap: the chosen head's heatmap of a detail window (at most
            :data:`MAX_HEATMAP_CELLS` cells), e.g. from :func:`viz.heatmap.head_heatmap`.
        strip: the token strip.
        title: the page title (escaped).
        marks: the letters on each marked head's picture, ``(layer, head) -> (letters,
            meaning)``, e.g. ``(2, 1) -> ("I", "induction")`` (escaped).

    Raises:
        ExportTooLarge: a heatmap with more than :data:`MAX_HEATMAP_CELLS` cells.
    """
    cells = heatmap_cells(heatmap)
    if cells > MAX_HEATMAP_CELLS:
        raise ExportTooLarge(
            f"The heatmap shows {cells:,} cells; an exported view holds at most "
            f"{MAX_HEATMAP_CELLS:,}. Choose a smaller detail window."
        )
    heatmap = go.Figure(heatmap)  # a copy: its labels push the margins out, whatever template
    heatmap.update_xaxes(automargin=True)  # the figure was built under (Streamlit's has none)
    heatmap.update_yaxes(automargin=True)
    figure = heatmap.to_html(
        include_plotlyjs=False,
        full_html=False,
        default_width="100%",
        config={"displaylogo": False, "responsive": True},
    )
    name = html.escape(f"{title} — {caption.model}, head {caption.layer}.{caption.head}")
    verb = "from" if strip.direction == "from" else "to"
    return "".join(
        [
            '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            f"<title>{name}</title><style>{STYLE}</style>",
            f"<script>{plotly_js()}</script></head><body>",
            f"<h1>{name}</h1>",
            _caption_html(caption),
            "<h2>All heads (max-pooled pictures)</h2>",
            _grid_html(grid, (caption.layer, caption.head), marks or {}),
            _marks_legend(marks or {}),
            f"<h2>Head {caption.layer}.{caption.head}</h2>",
            figure,
            f"<h2>Token strip: attention {verb} the selected token</h2>",
            legend_html(np.asarray(strip.weights, dtype=np.float64), strip.signed),
            '<div class="strip">',
            token_spans(
                strip.tokens,
                np.asarray(strip.weights, dtype=np.float64),
                strip.selected,
                strip.direction,
                strip.signed,
            ),
            "</div></body></html>",
        ]
    )


def export_size(
    grid: Sequence[Sequence[bytes | str]],
    cells: int,
    labels: Sequence[str],
    tokens: Sequence[str],
    caption: Caption,
) -> int:
    """Bytes :func:`view_html` will write (within a few percent), before building it.

    Args:
        grid: the grid pictures.
        cells: heatmap cells (rows x columns of the detail window).
        labels: the heatmap's row and column labels.
        tokens: the token strip's labels.
        caption: the caption.
    """
    pictures = sum(len(png_uri(p)) + 90 for row in grid for p in row if p)
    label_bytes = sum(len(html.escape(x).encode("utf-8")) + 3 for x in labels)
    strip = sum(2 * len(html.escape(t).encode("utf-8")) + STRIP_BYTES for t in tokens)
    text = len(
        json.dumps(
            [
                caption.prompt[: PROMPT_CHARS + 40],
                caption.model,
                caption.link,
                dict(caption.settings),
            ]
        ).encode("utf-8")
    )
    return int(
        BASE_BYTES
        + len(plotly_js().encode("utf-8"))
        + pictures
        + cells * CELL_BYTES
        + label_bytes
        + strip
        + text
    )
