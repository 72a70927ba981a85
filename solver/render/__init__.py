"""Views of a schedule: text grids, SVG Gantt chart, Chrome trace, torch CSV."""
