"""Costream's GNN in plain PyTorch: node-type encoders, ordered message passing, sum readout, one head.

Message passing follows Costream Alg. 1 / Sec. III-B: (1) operators -> hosts over placement edges, (2) hosts
->
operators, (3) along the data flow from the sources to the sink, one topological level at a time, so a
source's
state reaches the sink in a single pass. Each update is h'_v = MLP_{rel,T(v)}([h_v, sum_{u->v} h'_u]) (the
paper's "summed and concatenated"), per relation and destination node type. Readout sums all node states of a
graph and a head MLP maps it to one number.

Ablation variants (Costream Sec. VII-G, Exp. 7): ``message_passing="traditional"`` runs k synchronous rounds
over
all edges with one shared update MLP regardless of node type; ``hardware="no_hw_features"`` keeps host nodes
and placement edges but zeroes host features; ``hardware="no_hosts"`` drops host nodes entirely.

Graphs of a batch are concatenated; all aggregation is ``index_add`` over global node ids, and the ordered
pass
is vectorised over the batch level by level (levels are precomputed per graph in :func:`collate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from adaptstream.costmodel.features import HOST, NODE_TYPES, OP_KINDS, FeatureStats, RawGraph
from adaptstream.errors import CostModelError

MESSAGE_PASSING = ("ordered", "traditional")
HARDWARE_MODES = ("full", "no_hw_features", "no_hosts")


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@dataclass(frozen=True)
class GNNConfig:
    hidden: int = 64
    message_passing: str = "ordered"
    hardware: str = "full"
    traditional_rounds: int = 3
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.message_passing not in MESSAGE_PASSING:
            msg = f"message_passing must be one of {MESSAGE_PASSING}, got {self.message_passing!r}"
            raise CostModelError(msg)
        if self.hardware not in HARDWARE_MODES:
            msg = f"hardware must be one of {HARDWARE_MODES}, got {self.hardware!r}"
            raise CostModelError(msg)


@dataclass
class EncodedGraph:
    """A RawGraph with scaled, one-hot encoded node features (numpy, float32)."""

    x: dict[str, np.ndarray]
    type_index: dict[str, np.ndarray]
    placement: np.ndarray
    flow: np.ndarray
    level: np.ndarray
    n_nodes: int
    n_ops: int


def encode_graph(g: RawGraph, stats: FeatureStats) -> EncodedGraph:
    x = {t: stats.encode(t, g.numeric[t], g.categorical[t]) for t in NODE_TYPES}
    return EncodedGraph(x, g.type_index, g.placement, g.flow, g.level, g.n_nodes, g.n_ops)


def encode_graphs(graphs: Sequence[RawGraph], stats: FeatureStats) -> list[EncodedGraph]:
    """encode_graph for many graphs at once: one scaling/one-hot call per node type instead of per graph."""
    if not graphs:
        return []
    xs: dict[str, list[np.ndarray]] = {}
    for t in NODE_TYPES:
        counts = [g.numeric[t].shape[0] for g in graphs]
        enc = stats.encode(
            t,
            np.concatenate([g.numeric[t] for g in graphs]),
            np.concatenate([g.categorical[t] for g in graphs]),
        )
        xs[t] = np.split(enc, np.cumsum(counts)[:-1])
    return [
        EncodedGraph({t: xs[t][i] for t in NODE_TYPES}, g.type_index, g.placement, g.flow, g.level, g.n_nodes, g.n_ops)
        for i, g in enumerate(graphs)
    ]


@dataclass
class Batch:
    """Concatenated graphs with global node ids; everything the forward pass needs, already on a device."""

    n_graphs: int
    n_nodes: int
    graph_of_node: torch.Tensor
    x: dict[str, torch.Tensor]
    idx: dict[str, torch.Tensor]
    op_idx: torch.Tensor
    host_idx: torch.Tensor
    place_src: torch.Tensor  # operator ids
    place_dst: torch.Tensor  # host ids
    flow_levels: list[tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]] = field(default_factory=list)
    all_src: torch.Tensor | None = None
    all_dst: torch.Tensor | None = None

    def to(self, device: torch.device) -> Batch:
        def mv(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=True)

        return Batch(
            self.n_graphs,
            self.n_nodes,
            mv(self.graph_of_node),
            {k: mv(v) for k, v in self.x.items()},
            {k: mv(v) for k, v in self.idx.items()},
            mv(self.op_idx),
            mv(self.host_idx),
            mv(self.place_src),
            mv(self.place_dst),
            [(mv(s), mv(d), {k: mv(v) for k, v in n.items()}) for s, d, n in self.flow_levels],
            None if self.all_src is None else mv(self.all_src),
            None if self.all_dst is None else mv(self.all_dst),
        )


def collate(graphs: Sequence[EncodedGraph], stats: FeatureStats) -> Batch:
    """Concatenate graphs: offset local ids, group data-flow edges and operator nodes by topological level."""
    if not graphs:
        msg = "cannot collate an empty batch"
        raise CostModelError(msg)
    sizes = np.array([g.n_nodes for g in graphs])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    n_nodes = int(sizes.sum())
    graph_of_node = np.repeat(np.arange(len(graphs)), sizes)
    x, idx = {}, {}
    for t in NODE_TYPES:
        xs = [g.x[t] for g in graphs]
        x[t] = torch.from_numpy(np.concatenate(xs)) if xs else torch.zeros(0, stats.dim(t))
        idx[t] = torch.from_numpy(np.concatenate([g.type_index[t] + o for g, o in zip(graphs, offsets, strict=True)]))
    place = np.concatenate([g.placement + o for g, o in zip(graphs, offsets, strict=True)], axis=1)
    flow = np.concatenate([g.flow + o for g, o in zip(graphs, offsets, strict=True)], axis=1)
    level = np.concatenate([g.level for g in graphs])
    node_type = np.full(n_nodes, -1)
    for t in NODE_TYPES:
        node_type[idx[t].numpy()] = NODE_TYPES.index(t)
    op_idx = np.flatnonzero(level >= 0)
    host_idx = np.flatnonzero(level < 0)
    flow_levels = []
    dst_level = level[flow[1]] if flow.shape[1] else np.zeros(0, dtype=np.int64)
    for lv in range(1, int(level.max()) + 1 if level.size else 1):
        sel = dst_level == lv
        nodes = {}
        at_level = np.flatnonzero(level == lv)
        for k in OP_KINDS:
            ids = at_level[node_type[at_level] == NODE_TYPES.index(k)]
            if ids.size:
                nodes[k] = torch.from_numpy(ids)
        flow_levels.append((torch.from_numpy(flow[0, sel]), torch.from_numpy(flow[1, sel]), nodes))
    # union of all edge sets for the traditional scheme: placement, its reverse, data flow
    all_src = np.concatenate([place[0], place[1], flow[0]])
    all_dst = np.concatenate([place[1], place[0], flow[1]])
    return Batch(
        n_graphs=len(graphs),
        n_nodes=n_nodes,
        graph_of_node=torch.from_numpy(graph_of_node),
        x=x,
        idx=idx,
        op_idx=torch.from_numpy(op_idx),
        host_idx=torch.from_numpy(host_idx),
        place_src=torch.from_numpy(place[0]),
        place_dst=torch.from_numpy(place[1]),
        flow_levels=flow_levels,
        all_src=torch.from_numpy(all_src),
        all_dst=torch.from_numpy(all_dst),
    )


def mlp(d_in: int, hidden: int, d_out: int, dropout: float = 0.0) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(d_in, hidden), nn.LeakyReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers += [nn.Linear(hidden, d_out), nn.LeakyReLU()]
    return nn.Sequential(*layers)


def _scatter_sum(h: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.zeros(n, h.shape[1], dtype=h.dtype, device=h.device)
    return out.index_add(0, dst, h.index_select(0, src))


class CostGNN(nn.Module):
    """One Costream cost model: predicts a single metric (a regression value or a classification logit)."""

    def __init__(self, stats: FeatureStats, config: GNNConfig | None = None) -> None:
        super().__init__()
        self.config = config or GNNConfig()
        h = self.config.hidden
        self.encoders = nn.ModuleDict({t: mlp(stats.dim(t), h, h) for t in NODE_TYPES})
        if self.config.message_passing == "ordered":
            self.to_host = mlp(2 * h, h, h, self.config.dropout)
            self.to_op = nn.ModuleDict({k: mlp(2 * h, h, h, self.config.dropout) for k in OP_KINDS})
            self.along_flow = nn.ModuleDict({k: mlp(2 * h, h, h, self.config.dropout) for k in OP_KINDS})
        else:
            self.shared_update = mlp(2 * h, h, h, self.config.dropout)
        self.head = nn.Sequential(nn.Linear(h, h), nn.LeakyReLU(), nn.Linear(h, 1))

    def encode(self, b: Batch) -> torch.Tensor:
        h = self.config.hidden
        hs = torch.zeros(b.n_nodes, h, device=b.graph_of_node.device)
        for t in NODE_TYPES:
            if b.idx[t].numel() == 0:
                continue
            x = b.x[t]
            if t == HOST and self.config.hardware == "no_hw_features":
                x = torch.zeros_like(x)
            hs = hs.index_copy(0, b.idx[t], self.encoders[t](x))
        return hs

    def _update(self, hs: torch.Tensor, ids: torch.Tensor, agg: torch.Tensor, net: nn.Module) -> torch.Tensor:
        new = net(torch.cat([hs.index_select(0, ids), agg.index_select(0, ids)], dim=1))
        return hs.index_copy(0, ids, new)

    def node_states(self, b: Batch) -> torch.Tensor:
        """Hidden states of every node after message passing (exposed for tests and inspection)."""
        hs = self.encode(b)
        n = b.n_nodes
        use_hosts = self.config.hardware != "no_hosts"
        if self.config.message_passing == "traditional":
            if use_hosts:
                assert b.all_src is not None and b.all_dst is not None  # built with hosts
                src, dst = b.all_src, b.all_dst
            else:
                ops = [(s, d) for s, d, _ in b.flow_levels]
                src = torch.cat([s for s, _ in ops]) if ops else b.op_idx[:0]
                dst = torch.cat([d for _, d in ops]) if ops else b.op_idx[:0]
            for _ in range(self.config.traditional_rounds):
                agg = _scatter_sum(hs, src, dst, n)
                hs = self.shared_update(torch.cat([hs, agg], dim=1))
            if not use_hosts:
                hs = hs.index_fill(0, b.host_idx, 0.0)
            return hs
        if use_hosts:
            # (1) operators -> hosts over placement edges
            agg = _scatter_sum(hs, b.place_src, b.place_dst, n)
            hs = self._update(hs, b.host_idx, agg, self.to_host)
            # (2) hosts -> operators (reverse placement edges), per operator kind
            agg = _scatter_sum(hs, b.place_dst, b.place_src, n)
            for k in OP_KINDS:
                if b.idx[k].numel():
                    hs = self._update(hs, b.idx[k], agg, self.to_op[k])
        # (3) along the data flow, level by level from the sources to the sink
        for src, dst, nodes in b.flow_levels:
            agg = _scatter_sum(hs, src, dst, n)
            for k, ids in nodes.items():
                hs = self._update(hs, ids, agg, self.along_flow[k])
        if not use_hosts:
            hs = hs.index_fill(0, b.host_idx, 0.0)
        return hs

    def forward(self, b: Batch) -> torch.Tensor:
        hs = self.node_states(b)
        pooled = torch.zeros(b.n_graphs, hs.shape[1], device=hs.device).index_add(0, b.graph_of_node, hs)
        return self.head(pooled).squeeze(1)

    def config_dict(self) -> dict:
        return asdict(self.config)
