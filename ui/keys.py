"""Every session-state key of the app, in one place: a class per page, prefixed with its name.

Widgets are created with these keys, callbacks read them, and tests import them instead of
spelling strings, so a renamed key cannot leave a test or a callback behind. Keys that are not
widgets (what the session remembers across pages) are in :class:`Session`. No Streamlit here.
"""

from __future__ import annotations

from enum import StrEnum


class Session(StrEnum):
    """What a browser session remembers beyond one page (not widgets)."""

    LINK = "atlas_link"  # the ui.links.Link the session was opened with
    LINK_NOTES = "atlas_link_notes"
    GOOD_MODEL = "atlas_good"  # the last AllowedSpec that loaded
    FAILED_MODEL = "atlas_failed"  # (AllowedSpec, error) of the last failure
    LAST_RUN = "atlas_last_run"  # RunKey of the last run shown
    CANCELLED = "atlas_cancelled_jobs"
    ASKED = "atlas_asked_jobs"  # keys of costly work the visitor asked to start
    EXPLORER = "atlas_view"  # the explorer's ExplorerView


class Sidebar(StrEnum):
    SOURCE = "atlas_source"
    NAME = "atlas_name"
    DEVICE = "atlas_device"
    DTYPE = "atlas_dtype"
    TRUST = "atlas_trust"
    PROMPT = "atlas_prompt"
    EXAMPLE = "atlas_example"
    PLACEMENT = "atlas_placement"
    BACK_TO_BUNDLED = "atlas_back_to_bundled"


class Explorer(StrEnum):
    LAYER = "explorer_layer"
    HEAD = "explorer_head"
    TOKEN = "explorer_token"
    TOKEN_AT = "explorer_token_at"  # the query by position, on prompts too long for a list
    GRID = "explorer_grid"
    TOKENS = "explorer_tokens"
    GATES = "explorer_gates"
    OVERVIEW = "explorer_overview"
    SCOPE = "explorer_scope"
    DIRECTION = "explorer_dir"
    SCALE = "explorer_scale"
    RANGE = "explorer_norm"
    PIN = "explorer_pin"
    WEIGHTED = "explorer_vw"
    GRID_SHOWN = "explorer_grid_shown"
    JUMP = "explorer_jump"
    HEATMAP = "explorer_heatmap"
    CSV = "explorer_csv"
    URL = "atlas_url"
    MODE = "explorer_mode"
    PROMPT_B = "explorer_prompt_b"
    WORDS = "explorer_words"
    ROLLOUT = "explorer_rollout"
    DIVERGENCE_GRID = "explorer_divergence_grid"
    DIVERGENCE_TABLE = "explorer_divergence_table"
    COMPARE_START = "explorer_compare_start"
    COMPARE_CSV = "explorer_compare_csv"
    HEATMAP_A = "explorer_heatmap_a"
    HEATMAP_B = "explorer_heatmap_b"
    HEATMAP_DIFF = "explorer_heatmap_diff"
    EXPORT = "explorer_export"
    TOKENS_B = "explorer_tokens_b"
    JUMP_DIFFERENCE = "explorer_jump_difference"
    WHY_KEY = "explorer_why_key"  # the key position the Why here? panel explains
    WHY_START = "explorer_why_start"
    WHY_PAIR = "explorer_why_pair"

    @staticmethod
    def why_open(head: str) -> str:
        """The button of the Why here? panel that opens one part's head."""
        return f"explorer_why_open_{head}"


class Heads(StrEnum):
    VIEW = "heads_view"  # the page's HeadsView
    URL = "heads_url"
    CORPUS = "heads_corpus"
    UPLOAD = "heads_upload"
    TEXTS = "heads_passages"
    MAX_TOKENS = "heads_max_tokens"
    SPAN = "heads_seq_len"
    BATCH = "heads_batch"
    SEED = "heads_seed"
    EXAMPLE_SCORE = "heads_example_score"
    EXAMPLE_HEAD = "heads_example_head"
    RANKING = "heads_ranking"
    METHOD = "heads_method"
    BUDGET = "heads_budget"
    ABLATE = "heads_ablate"
    PRUNE_MODE = "heads_prune_mode"
    PRUNE_K = "heads_prune_k"
    PRUNE_GROUPS = "heads_prune_groups"
    PRUNE_PICK = "heads_prune_pick"
    PRUNE_DTYPE = "heads_prune_dtype"
    EXPORT = "heads_export"
    EXPORT_REQUEST = "heads_export_request"
    EXPORT_ZIP = "heads_export_zip"
    STATE = "heads_state"

    @staticmethod
    def threshold(score: str) -> str:
        """The flag threshold slider of one score."""
        return f"heads_th_{score}"


class HeadAtlas(StrEnum):
    START = "headatlas_start"
    ABLATE = "headatlas_ablate"
    TEXTS = "headatlas_texts"
    MAX_TOKENS = "headatlas_max_tokens"
    VIEW = "headatlas_view"  # the page's AtlasView
    X = "headatlas_x"
    Y = "headatlas_y"
    COLOUR = "headatlas_colour"
    SIZE = "headatlas_size"
    MAP = "headatlas_map"
    SECOND = "headatlas_second"
    SECOND_MAP = "headatlas_second_map"
    PICTURES = "headatlas_pictures"  # the map's hover pictures (one component per map)
    SECOND_PICTURES = "headatlas_second_pictures"
    PICTURES_SENT = "headatlas_pictures_sent"  # map key -> the pictures the browser holds
    URL = "headatlas_url"
    DOWNLOAD_CSV = "headatlas_download_csv"
    DOWNLOAD_ZIP = "headatlas_download_zip"


class Circuits(StrEnum):
    PRESET = "circuits_preset"
    CLEAN = "circuits_clean"
    CORRUPTED = "circuits_corrupted"
    ANSWER = "circuits_answer"
    WRONG = "circuits_wrong"
    FILLED = "circuits_filled"
    PATCH = "circuits_patch"
    HEAD = "circuits_head"
    STATE = "circuits_state"  # the page's CircuitsState
    TAB = "circuits_tab"
    FIX_ANSWER = "circuits_fix_answer"
    FIX_WRONG = "circuits_fix_wrong"
    EXACT_CHECK = "circuits_exact_check"
    RUN_ATP = "circuits_run_atp"
    QK_FIX = "circuits_qk_fix"
    GRAD_DROP = "circuits_grad_drop"
    VERIFY_TOP = "circuits_verify_top"
    NODE = "circuits_node"
    ATP_HEAD = "circuits_atp_head"
    RECEIVER = "circuits_receiver"
    INPUT = "circuits_input"
    MLPS = "circuits_mlps"
    RUN_PATH = "circuits_run_path"
    EDGES = "circuits_edges"
    EDGES_MODE = "circuits_edges_mode"
    GRAPH_SOURCE = "circuits_graph_source"
    GRAPH_INPUTS = "circuits_graph_inputs"
    THRESHOLD = "circuits_threshold"
    GRAPH = "circuits_graph"
    GRAPH_NODE = "circuits_graph_node"
    RUN_WEIGHTS = "circuits_run_weights"
    WEIGHT_SCORE = "circuits_weight_score"
    COMPOSITION = "circuits_composition"
    COMPOSITION_RECEIVER = "circuits_composition_receiver"
    TWIN = "circuits_twin"
    RUN_DATA = "circuits_run_data"
    URL = "circuits_url"
    LOADINGS_HEAD = "circuits_loadings_head"
    LOADINGS_ASKED = "circuits_loadings_asked"  # the loadings key the visitor asked for
    RUN_LOADINGS = "circuits_run_loadings"
    RUN_PATH_LOADINGS = "circuits_run_path_loadings"


class Scaling(StrEnum):
    VIEW = "scaling_view"  # the page's ScalingView
    URL = "scaling_url"
    AXIS = "scaling_axis"
    RANGE = "scaling_range"
    POINTS = "scaling_points"
    HEAD = "scaling_head"
    PICK = "scaling_pick"
    LOSS = "scaling_loss"
    START = "scaling_start"
    SEED = "scaling_seed"


class Kernel(StrEnum):
    VIEW = "kernel_view"  # the page's KernelView
    URL = "kernel_url"
    DTYPE = "kernel_dtype"
    HEAD = "kernel_head"
    TABLE = "kernel_table"


class Classroom(StrEnum):
    VIEW = "classroom_view"
    URL = "classroom_url"
    TAB = "classroom_tab"
    CAUSAL = "classroom_causal"
    LAYER = "classroom_layer"
    HEAD = "classroom_head"
    START = "classroom_start"
    WIDTH = "classroom_width"
    EXAMPLE_A = "classroom_ex_a"
    EXAMPLE_B = "classroom_ex_b"
    TEXT_SIZE = "classroom_text_size"
    SHARE_H = "classroom_h"
    SHARE_G = "classroom_g"
    SHARE_D_HEAD = "classroom_share_dhead"
    COST_PRESET = "classroom_preset"
    COST_DTYPE = "classroom_dtype"
    COST_BATCH = "classroom_batch"
    COST_SEQ = "classroom_seq"
    SHARE_FIGURE = "classroom_share_fig"
    SHARE_MODEL_FIGURE = "classroom_share_model_fig"
    FLOPS_FIGURE = "classroom_flops_fig"
    KV_FIGURE = "classroom_kv_fig"
    ROPE_Q = "classroom_rope_q"
    ROPE_K = "classroom_rope_k"
    ALIBI_HEADS = "classroom_alibi_h"
    ALIBI_HEAD = "classroom_alibi_head"
    SINE_POSITIONS = "classroom_sin_pos"
    SINE_WIDTH = "classroom_sin_d"
    SINE_FIGURE = "classroom_sin_fig"
    CAUSAL_FIGURE = "classroom_causal_fig"
    WINDOW = "classroom_window"
    WINDOW_FIGURE = "classroom_window_fig"
    SATURATION_DK = "classroom_sat_dk"
    MEMORY_N = "classroom_mem_n"
    ONLINE_TABLE = "classroom_online_table"

    @staticmethod
    def matrix(name: str) -> str:
        """The text box of matrix ``name`` (``q``, ``k`` or ``v``)."""
        return f"classroom_{name}"

    @staticmethod
    def config(field: str) -> str:
        """A number box of the cost calculator's configuration."""
        return f"classroom_cfg_{field}"


class Generate(StrEnum):
    STATE = "generate_state"  # the page's GenerateState
    MAX_NEW = "generate_max_new"
    DECODING = "generate_decoding"
    TEMPERATURE = "generate_temperature"
    TOP_K = "generate_top_k"
    TOP_P = "generate_top_p"
    SEED = "generate_seed"
    CHAT = "generate_chat"
    GO = "generate_go"
    NEW_SEED = "generate_new_seed"
    OUTPUT = "generate_output"
    STEPS_TABLE = "generate_steps_table"
    STEP = "generate_step"
    HEAD = "generate_head"
    ROWS_FIGURE = "generate_rows_fig"
    STRIP = "generate_strip"
    SERIES_FIGURE = "generate_series_fig"
    SINK_GRID = "generate_sink_grid"
    URL = "generate_url"
    STEP_URL = "generate_step_url"
    KV_FIGURE = "generate_kv_fig"
    KV_TABLE = "generate_kv_table"
    EVICT_SOURCE = "generate_evict_source"
    EVICT_TEXT = "generate_evict_text"
    EVICT_BUDGETS = "generate_evict_budgets"
    EVICT_SINKS = "generate_evict_sinks"
    EVICT_POLICIES = "generate_evict_policies"
    EVICT_MAX_TOKENS = "generate_evict_max_tokens"
    EVICT_RUN = "generate_evict_run"
    EVICT_FIGURE = "generate_evict_fig"
    EVICT_TABLE = "generate_evict_table"
