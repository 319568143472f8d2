"""Settings: the value of every kernel and reply setting of a server, typed; each default, and what
each one means, is its declaration's in `catalog`."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from warmkernel.settings.declarations import CATALOG

ResultMode = Literal["content", "structured"]

REPLY_SETTINGS = frozenset(setting.dest for setting in CATALOG if setting.scope == "reply")
"""The settings each client chooses for its own replies (its hello carries them); every other
setting is the daemon's, for its kernels."""

DEFAULTS = MappingProxyType(
    {setting.dest: setting.default for setting in CATALOG if setting.scope in ("kernel", "reply")}
)
"""Each `Settings` field's default, by field."""


@dataclass(frozen=True)
class Settings:
    """A server's settings (the daemon scope is the daemon process's own: not here)."""

    python: str = DEFAULTS["python"]
    add_ipykernel: bool = DEFAULTS["add_ipykernel"]
    result_mode: ResultMode = DEFAULTS["result_mode"]
    default_wait_s: float = DEFAULTS["default_wait_s"]
    inline_max_lines: int = DEFAULTS["inline_max_lines"]
    inline_max_chars: int = DEFAULTS["inline_max_chars"]
    max_output_bytes: int = DEFAULTS["max_output_bytes"]
    max_cell_output_bytes: int = DEFAULTS["max_cell_output_bytes"]
    max_kernel_memory_bytes: int | None = DEFAULTS["max_kernel_memory_bytes"]
    spill_threshold_bytes: int = DEFAULTS["spill_threshold_bytes"]
    spare_kernels: int = DEFAULTS["spare_kernels"]
    notebook: str | None = DEFAULTS["notebook"]
    inspect_timeout_s: float = DEFAULTS["inspect_timeout_s"]
    inspect_sample_rows: int = DEFAULTS["inspect_sample_rows"]
    max_images_per_reply: int = DEFAULTS["max_images_per_reply"]
    max_image_bytes: int = DEFAULTS["max_image_bytes"]
    jupyter_url: str | None = DEFAULTS["jupyter_url"]
    jupyter_token: str | None = field(default=DEFAULTS["jupyter_token"], repr=False)
    kernel_name: str = DEFAULTS["kernel_name"]
    max_kernels: int = DEFAULTS["max_kernels"]
    kernel_idle_stop_s: float = DEFAULTS["kernel_idle_stop_s"]
    kernel_username: str | None = DEFAULTS["kernel_username"]
    kernel_working_dir: str | None = DEFAULTS["kernel_working_dir"]
    kernel_env: tuple[str, ...] = DEFAULTS["kernel_env"]
    kernel_launch_timeout_s: float = DEFAULTS["kernel_launch_timeout_s"]
    jupyter_headers: tuple[str, ...] = DEFAULTS["jupyter_headers"]
    jupyter_ca_bundle: str | None = DEFAULTS["jupyter_ca_bundle"]
    jupyter_client_cert: str | None = DEFAULTS["jupyter_client_cert"]
    jupyter_client_key: str | None = DEFAULTS["jupyter_client_key"]
    jupyter_token_file: str | None = DEFAULTS["jupyter_token_file"]
    save_outputs: bool = DEFAULTS["save_outputs"]
    read_max_chars: int = DEFAULTS["read_max_chars"]
    search_timeout_s: float = DEFAULTS["search_timeout_s"]
    running_tail_lines: int = DEFAULTS["running_tail_lines"]
    chart_timeout_s: float = DEFAULTS["chart_timeout_s"]
    summarizers: tuple[str, ...] = DEFAULTS["summarizers"]
    config_files: tuple[str, ...] = DEFAULTS["config_files"]
    jupyter_notebook: str | None = DEFAULTS["jupyter_notebook"]
    progress_interval_s: float = DEFAULTS["progress_interval_s"]
    default_silence_s: float | None = DEFAULTS["default_silence_s"]
