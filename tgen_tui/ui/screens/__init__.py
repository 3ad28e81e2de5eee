"""The console's screens, one module per screen or close group:

- :mod:`.base`: ViewScreen, what every view screen is (built once, updated per snapshot);
- :mod:`.main`: Main, one column per port (its rows declared once);
- :mod:`.flows`: the socket flows (goodput, RTT, retransmits, UDP loss, fairness);
- :mod:`.streams`, :mod:`.dut`, :mod:`.workers`, :mod:`.log`, :mod:`.help`: the pages of
  those names;
- :mod:`.port`: the port page (``o``/enter);
- :mod:`.capture`: the Capture screen (``P``: a capture of the selected port, its frames);
- :mod:`.modals`: quit while traffic runs, an exact rate, the profile picker.

:data:`VIEW_SCREENS` is the registry the app installs, by view name (the names that
ui/actions.py's ``view('...')`` actions open). No screen module imports this package's
registry: they import :mod:`.base`.
"""

from __future__ import annotations

from tgen_tui.ui.screens.base import ViewScreen, narrow
from tgen_tui.ui.screens.capture import CaptureScreen
from tgen_tui.ui.screens.dut import DutScreen
from tgen_tui.ui.screens.flows import FlowsScreen
from tgen_tui.ui.screens.help import HelpScreen
from tgen_tui.ui.screens.log import LogScreen
from tgen_tui.ui.screens.main import MainScreen
from tgen_tui.ui.screens.modals import ConfirmQuit, ProfilePicker, RatePrompt
from tgen_tui.ui.screens.port import PortScreen
from tgen_tui.ui.screens.streams import StreamsScreen
from tgen_tui.ui.screens.workers import WorkersScreen

VIEW_SCREENS: dict[str, type[ViewScreen]] = {
    cls.VIEW: cls
    for cls in (
        MainScreen,
        StreamsScreen,
        FlowsScreen,
        DutScreen,
        WorkersScreen,
        LogScreen,
        CaptureScreen,
        HelpScreen,
        PortScreen,
    )
}

__all__ = [
    "VIEW_SCREENS",
    "CaptureScreen",
    "ConfirmQuit",
    "DutScreen",
    "FlowsScreen",
    "HelpScreen",
    "LogScreen",
    "MainScreen",
    "PortScreen",
    "ProfilePicker",
    "RatePrompt",
    "StreamsScreen",
    "ViewScreen",
    "WorkersScreen",
    "narrow",
]
