"""Text views of the operations' typed results: the only code that formats a result for a terminal."""
