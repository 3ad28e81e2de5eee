"""The Textual console (``tgen tui``): screens, keys, the engine host and the editor.

Only this package imports Textual; the core packages never do (DESIGN rule 1).
"""
