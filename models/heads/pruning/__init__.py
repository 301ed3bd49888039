"""Pruning heads: how much each head matters, and a checkpoint without the ones that do not.

- :mod:`models.heads.pruning.loss` -- the loss a measurement watches, per text and per budget;
- :mod:`models.heads.pruning.ablation` -- ablation hooks, the head-mask gradient, the order;
- :mod:`models.heads.pruning.importance` -- importance over a corpus, batched and resumed;
- :mod:`models.heads.pruning.prune` -- which heads are removed or masked, and how;
- :mod:`models.heads.pruning.standalone` -- plain copies of a model: loaded under the load
  lock, their loss and forward time;
- :mod:`models.heads.pruning.export` -- the pruned checkpoint on disk, its report and zip.
"""
