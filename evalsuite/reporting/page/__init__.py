"""The report page (`evalsuite report`): its data, HTML, markdown and LaTeX, cost section and SVG charts."""
