"""HTML reports of run cards and leaderboard pages (`champollion report`,
`champollion leaderboard --html`): one self-contained file each."""
from apps.report.inputs import entry_inputs, entry_inputs_from_files, plain_text_inputs, unmatched_entries
from apps.report.render import write_leaderboard_page, write_report

__all__ = ["entry_inputs", "entry_inputs_from_files", "plain_text_inputs", "unmatched_entries",
           "write_leaderboard_page", "write_report"]
