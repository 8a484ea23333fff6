"""The parts every HTML page is built of: escaping, tables and figures (:mod:`.html`), the
interactive chart primitives and their script (:mod:`.charts`, ``charts.js``), and what a
report section is (:mod:`.section`). Each verb builds its own section from these."""
