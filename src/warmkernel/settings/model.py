"""Settings: every tunable of a server, with its default, in one place."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ResultMode = Literal["content", "structured"]


REPLY_SETTINGS = frozenset(
    {
        "result_mode",
        "default_wait_s",
        "inline_max_lines",
        "inline_max_chars",
        "max_images_per_reply",
        "max_image_bytes",
        "notebook",
        "progress_interval_s",
        "default_silence_s",
    }
)
"""The settings each client chooses for its own replies (its hello carries them); every other
setting is the daemon's, for its kernels."""


@dataclass(frozen=True)
class Settings:
    python: str = "auto"
    """The interpreter that runs the kernel (it needs ipykernel); `auto`: the project's environment,
    found as `kernel.environment` says."""
    add_ipykernel: bool = False
    """Let `auto` install ipykernel into a project environment that lacks it (with the command the
    error names); off: that error is returned instead."""
    result_mode: ResultMode = "content"
    """`structured` adds structuredContent and output schemas; the text is the same."""
    default_wait_s: float = 10.0
    """How long run_python waits for a cell before replying that it still runs."""
    default_silence_s: float | None = None
    """run_python also replies once a cell has printed nothing this long (`warmkernel run
    --silence`); None: only the cell's own `--silence` directive does."""
    inline_max_lines: int = 300
    inline_max_chars: int = 16_000
    """The inline budget of a finished cell's reply; past it, head and tail are shown."""
    read_max_chars: int = 200_000
    """The most characters one read_python_output reply carries."""
    search_timeout_s: float = 5.0
    """Time budget of one search; a regex that runs longer is abandoned."""
    running_tail_lines: int = 5
    """How many of the latest output lines a reply for a running cell shows."""
    spill_threshold_bytes: int = 1_000_000
    """An execution's output moves from memory to files in the private runtime root past this size."""
    max_output_bytes: int = 2_000_000_000
    """The most bytes of spilled output kept; past it the oldest finished executions' output is dropped."""
    inspect_timeout_s: float = 5.0
    """Time budget of one variable summary or listing; past it a degraded summary comes back."""
    inspect_sample_rows: int = 5
    """Rows of a DataFrame a variable summary shows as its sample."""
    summarizers: tuple[str, ...] = ()
    """User summarizers, `module:function`, imported inside the kernel and tried before the built-ins."""
    save_outputs: bool = True
    """Write the outputs of notebook cells run through warmkernel back into the `.ipynb`."""
    max_images_per_reply: int = 8
    """Images one reply carries as image content; the rest are named with the call that reads them."""
    max_image_bytes: int = 5_000_000
    """Larger images are not shown inline; they are named with the call that reads them."""
    progress_interval_s: float = 5.0
    """While a tool waits for a cell, a progress notification goes out this often (if the client asked)."""
    chart_timeout_s: float = 10.0
    """A chart (Vega, Vega-Lite, SVG, Plotly) not drawn as a picture within this is shown as a note."""
    spare_kernels: int = 0
    """Fresh local kernels kept started in the background, so a reset swaps one in at once."""
    max_cell_output_bytes: int = 1_000_000_000
    """Output one cell may produce; past it the cell's further output is dropped (and counted), the
    cell runs on."""
    max_kernel_memory_bytes: int | None = None
    """Memory (resident, the kernel and every process it started) past which the running cell is
    interrupted, and the kernel killed if it stays above for 5 s; None: no ceiling."""
    jupyter_url: str | None = None
    """A Jupyter Server or (Enterprise) Kernel Gateway that runs the kernel instead of this machine."""
    jupyter_token: str | None = field(default=None, repr=False)
    """The token of `jupyter_url` (sent as `Authorization: token …`)."""
    kernel_name: str = "python3"
    """The kernelspec the Jupyter server starts."""
    max_kernels: int = 4
    """The most kernels of a workspace that run at once (`main` and named ones; stopped ones not counted)."""
    kernel_idle_stop_s: float = 7200.0
    """A kernel other than `main` with no call and no running cell for this long is stopped; 0: never."""
    jupyter_token_file: str | None = None
    """A file holding the token, read again whenever the server answers 401 (token rotation)."""
    jupyter_headers: tuple[str, ...] = ()
    """`NAME=VALUE` headers sent on every request and websocket to the server (e.g. for a proxy)."""
    jupyter_ca_bundle: str | None = None
    """A PEM file of the certificate authorities to trust for an https server (REST and websocket)."""
    jupyter_client_cert: str | None = None
    """A PEM client certificate for servers that ask for one (with its key, or see `jupyter_client_key`)."""
    jupyter_client_key: str | None = None
    """The client certificate's private key, when it is not in the certificate's file."""
    kernel_username: str | None = None
    """`KERNEL_USERNAME` on create (Enterprise Gateway authorizes and impersonates by it); None: the local
    user's name."""
    kernel_working_dir: str | None = None
    """`KERNEL_WORKING_DIR` on create: the kernel's working directory, a path on the server's side."""
    kernel_env: tuple[str, ...] = ()
    """`NAME=VALUE` variables of the kernel's environment on create (image, namespace, ...)."""
    kernel_launch_timeout_s: float = 120.0
    """How long creating a kernel on the server and its first `kernel_info` may take (an image pull)."""
    notebook: str | None = None
    """The notebook the notebook tools use when a call gives no path (relative to the workspace)."""
    config_files: tuple[str, ...] = ()
    """The configuration files this server's settings were read from (python_status names them)."""
    jupyter_notebook: str | None = None
    """A notebook path on the Jupyter server: the kernel joins that notebook's server session, so an
    IDE opening the notebook there attaches to it."""
