"""What a run holds beside its softmax patterns when its layers are not all plain softmax.

Per layer, only where the layer has it: each row's weight on the learned sink (and each head's
sink logit), each head's output gate at each query, the mixing matrix of a linear-attention
layer, and the queries and keys of a latent-attention layer (for the split of its scores). A
linear layer has no softmax pattern: its place in the pattern store holds zeros that no view
reads (every view asks :meth:`RunExtras.kind` first).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from jaxtyping import Float

from models.model.variants import AttentionKind, LayerVariant
from models.model.variants.latent import split_scores


@dataclass(frozen=True)
class RunExtras:
    """The variant data of one run (NumPy arrays, read-only, no model).

    Attributes:
        layers: what each layer computes.
        sinks: layer -> ``head_index query_pos`` each row's weight on the learned sink.
        sink_logits: layer -> ``head_index`` the learned sink logits.
        gates: layer -> ``head_index query_pos d_head`` the output gate ``sigmoid(g)``.
        mixing: layer -> ``v_head query_pos key_pos`` a linear layer's mixing matrix.
        latent_qk: layer -> ``(q, k)``, each ``head_index pos d_qk``, of a latent layer.
        scales: layer -> the logit scale of a latent layer.
    """

    layers: tuple[LayerVariant, ...]
    sinks: dict[int, np.ndarray] = field(default_factory=dict)
    sink_logits: dict[int, np.ndarray] = field(default_factory=dict)
    gates: dict[int, np.ndarray] = field(default_factory=dict)
    mixing: dict[int, np.ndarray] = field(default_factory=dict)
    latent_qk: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    scales: dict[int, float] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        arrays = [*self.sinks.values(), *self.gates.values(), *self.mixing.values()]
        arrays += [a for pair in self.latent_qk.values() for a in pair]
        return int(sum(a.nbytes for a in arrays))

    def kind(self, layer: int) -> AttentionKind:
        return self.layers[layer].kind

    def softmax_layers(self) -> list[int]:
        """The layers with a softmax pattern (every layer but linear-attention ones)."""
        return [i for i, layer in enumerate(self.layers) if layer.softmax]

    def sink(self, layer: int, head: int, rows: slice) -> Float[np.ndarray, " row"] | None:
        """Each row's weight on head ``layer.head``'s learned sink, or None when it has none."""
        found = self.sinks.get(layer)
        return None if found is None else found[head, rows]

    def mean_gate(self, layer: int) -> Float[np.ndarray, "head_index query_pos"] | None:
        """Each head's gate at each query: ``sigmoid(g)`` averaged over its dimensions."""
        found = self.gates.get(layer)
        return None if found is None else found.mean(axis=-1)

    def notes(self, layer: int, head: int, query: int) -> list[str]:
        """What a view of head ``layer.head`` at ``query`` must say beside its pattern: the
        layer's kind, a learned sink's weight (the row plus its sink sums to 1), the output
        gate, the soft-cap, and for a linear layer that its map is not a softmax."""
        variant = self.layers[layer]
        said = []
        if variant.kind == "sliding":
            said.append(
                f"Layer {layer} is a sliding-window layer: each query sees only the last "
                f"{variant.window} keys."
            )
        elif variant.kind == "linear":
            said.append(
                f"Layer {layer} is linear attention (Gated DeltaNet), not a softmax: the map "
                "shown is its mixing matrix M (o_t = Σ_s M[t, s] v_s), whose entries are not "
                "attention weights and can be negative (red positive, blue negative, white 0, "
                "the range set by the largest |M|); its rows do not sum to 1 and softmax "
                "scores do not apply to it."
            )
        sink = self.sinks.get(layer)
        if sink is not None:
            logit = self.sink_logits.get(layer)
            at = float(sink[head, query])
            said.append(
                f"Learned sink: this head puts {at:.4%} of query {query}'s attention on its "
                f"sink, which is not a token (the keys shown hold the other {1 - at:.4%}); on "
                f"average {float(sink[head].mean()):.3g} over every query"
                + (f"; sink logit {float(logit[head]):+.3f}." if logit is not None else ".")
            )
        gates = self.mean_gate(layer)
        if gates is not None:
            said.append(
                f"Output gate: the head passes on {float(gates[head, query]):.3g} of what it "
                f"reads at query {query} (sigmoid gate, mean over its dimensions); "
                f"{float(gates[head].mean()):.3g} on average."
            )
        if variant.softcap is not None:
            said.append(
                f"Scores are soft-capped at {variant.softcap:g} (c·tanh(s/c)) before the "
                "softmax; the weights shown are after the cap."
            )
        return said

    def latent_split(
        self, layer: int, head: int
    ) -> tuple[Float[np.ndarray, "query_pos key_pos"], Float[np.ndarray, "query_pos key_pos"]]:
        """Content and RoPE parts of every score of one latent-attention head."""
        q, k = self.latent_qk[layer]
        latent = self.layers[layer].latent
        assert latent is not None
        content, rope = split_scores(
            torch.from_numpy(np.array(q[head : head + 1])),
            torch.from_numpy(np.array(k[head : head + 1])),
            latent.nope_dim,
            self.scales[layer],
        )
        return content[0].numpy(), rope[0].numpy()
