// Time-series charts on uPlot (served from the package: no CDN). One chart per measure group, sized to
// its container and resized with it. Never isolated dots, whatever the data's sparseness (points are
// never drawn):
// - `bars`: counts and sums (requests, errors, tokens, cost). A bucket's count is a bar over that bucket,
//   so one busy minute in a quiet day is a visible bar, and empty buckets (the server sends zeros) none.
// - `levels`: measures that do not exist for an empty bucket (percentiles, rates). Each bucket's value is
//   drawn as a flat segment across the bucket, joined to the next busy bucket's segment when they touch,
//   and broken (no line through a gap, spanGaps false) across empty ones: an empty bucket is not a zero
//   latency, and a lone busy bucket is still a segment, not a dot.
import uPlot from '/assets/vendor/uPlot.esm.js'
import { axisTime, bucketTime } from './format.js'

export interface Line {
  readonly label: string
  readonly color: string
  readonly values: ReadonlyArray<number | null>
  readonly fill?: boolean
}

export interface ChartSpec {
  /** Seconds since the epoch, one per bucket. */
  readonly x: readonly number[]
  readonly lines: readonly Line[]
  /** Formats a value for the axis and the legend. */
  readonly format: (v: number) => string
  /** Counts: ticks on whole numbers only. */
  readonly integer?: boolean
  /** The x range to show even where the series has no points: [from, to] in seconds. */
  readonly range: readonly [number, number]
  /** How the series are drawn (see the top of this file); default `levels`. */
  readonly style?: 'bars' | 'levels'
  /** The bucket's length in seconds (each x is a bucket's start). */
  readonly step: number
  /**
   * Bars: side by side within the bucket (separate quantities, like input and output tokens). Otherwise
   * each later series is a narrower bar in front of the first (a part of it, like blocked of requests).
   */
  readonly grouped?: boolean
}

const HEIGHT = 180
/** Room between two x-axis labels, in CSS pixels. */
const LABEL_GAP = 16
/** The x-axis row under the plot: ticks, then the labels. */
const X_AXIS_SIZE = 30
const TICK = 6
const COUNT_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12]

/** #rrggbb as rgba() with `alpha`; `otherwise` for a colour in any other form. */
function rgba (color: string, alpha: number, otherwise: string): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color)
  return m === null ? otherwise : `rgba(${parseInt(m[1]!, 16)}, ${parseInt(m[2]!, 16)}, ${parseInt(m[3]!, 16)}, ${alpha})`
}

/** A faint fill of the line's colour. */
const fillOf = (color: string): string => rgba(color, 0.10, 'transparent')
/** A bar's fill: the colour, nearly opaque. */
const barFill = (color: string): string => rgba(color, 0.85, color)

/** Bars stand at their bucket's middle. */
function bars (spec: ChartSpec): uPlot.AlignedData {
  return [spec.x.map((t) => t + spec.step / 2), ...spec.lines.map((l) => l.values.slice())] as uPlot.AlignedData
}

/**
 * Each bucket as two points, its start and its last second, holding its value: a linear path then draws
 * a flat segment per busy bucket, a step between touching ones, and nothing across an empty one.
 */
function levels (spec: ChartSpec): uPlot.AlignedData {
  const x: number[] = []
  for (const t of spec.x) x.push(t, t + Math.max(1, spec.step - 1))
  const ys = spec.lines.map((l) => l.values.flatMap((v) => [v, v]))
  return [x, ...ys] as uPlot.AlignedData
}

let measure: CanvasRenderingContext2D | null = null

/**
 * The width a tick needs: the widest label the axis can print (a time of day or a month and day, in the
 * browser's locale) and a gap, so uPlot picks no more ticks than the labels have room for.
 */
function labelSpace (font: string): number {
  measure ??= document.createElement('canvas').getContext('2d')
  if (measure === null) return 80
  measure.font = font
  const late = new Date(2026, 8, 30, 23, 58).getTime()
  const widest = Math.max(...[axisTime(late, 60_000), axisTime(late, 86_400_000)].map((x) => measure!.measureText(x).width))
  return Math.ceil(widest) + LABEL_GAP
}

/**
 * The x-axis labels as elements under the plot (uPlot draws only the ticks): each centred on its tick,
 * moved inward where it would cross the chart's edge, and left out where it would touch the label
 * before it. So labels never overlap and the last one is never cut off, at any width.
 */
function placeLabels (u: uPlot, box: HTMLElement, splits: readonly number[], texts: readonly string[]): void {
  box.textContent = ''
  const ratio = uPlot.pxRatio
  box.style.top = `${Math.round((u.bbox.top + u.bbox.height) / ratio) + TICK}px`
  let lastRight = -Infinity
  for (let i = 0; i < splits.length; i++) {
    const label = document.createElement('span')
    label.className = 'x-label'
    label.dataset.testid = 'x-label'
    label.textContent = texts[i] ?? ''
    box.appendChild(label)
    const width = label.offsetWidth
    const centre = u.bbox.left / ratio + u.valToPos(splits[i]!, 'x')
    const left = Math.min(Math.max(0, centre - width / 2), u.width - width)
    if (left < lastRight + LABEL_GAP / 2 || left < 0) {
      label.remove()
      continue
    }
    label.style.left = `${Math.round(left)}px`
    lastRight = left + width
  }
}

export class Charts {
  readonly #charts = new Map<HTMLElement, uPlot>()
  readonly #observer: ResizeObserver

  constructor () {
    this.#observer = new ResizeObserver((entries) => {
      for (const e of entries) {
        const chart = this.#charts.get(e.target as HTMLElement)
        const width = Math.floor(e.contentRect.width)
        if (chart !== undefined && width > 0 && width !== chart.width) chart.setSize({ width, height: HEIGHT })
      }
    })
  }

  /** Draws `spec` into `el`, replacing the chart that was there. */
  draw (el: HTMLElement, spec: ChartSpec): void {
    this.#charts.get(el)?.destroy()
    const fmt = spec.format
    const style = spec.style ?? 'levels'
    const n = spec.lines.length
    const series: uPlot.Series[] = spec.lines.map((l, i): uPlot.Series => ({
      label: l.label,
      stroke: l.color,
      width: style === 'bars' ? 0 : 1.5,
      fill: style === 'bars' ? barFill(l.color) : l.fill === true ? fillOf(l.color) : undefined,
      spanGaps: false,
      points: { show: false },
      paths: style !== 'bars'
        ? undefined
        : spec.grouped === true && n === 2
          ? uPlot.paths.bars!({ size: [0.4, Infinity, 1], align: i === 0 ? -1 : 1 })
          : uPlot.paths.bars!({ size: [i === 0 ? 0.8 : 0.45, Infinity, 1] }),
      value: (_u, v) => (v === null || v === undefined ? '—' : fmt(v)),
    }))
    // Times in the dashboard's one format (format.ts), in the browser's locale and zone.
    const bucketMs = spec.step * 1000
    el.textContent = ''
    const labels = document.createElement('div')
    labels.className = 'x-labels'
    const font = `12px ${getComputedStyle(el).fontFamily}`
    let ticks: { splits: number[]; texts: string[] } = { splits: [], texts: [] }
    const opts: uPlot.Options = {
      width: Math.max(200, Math.floor(el.clientWidth)),
      height: HEIGHT,
      scales: { x: { time: true, range: () => [spec.range[0], spec.range[1]] }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      series: [
        { value: (_u, v) => (v === null || v === undefined ? '—' : bucketTime(v * 1000, bucketMs)) },
        ...series,
      ],
      axes: [
        {
          stroke: '#5b6470',
          grid: { stroke: '#eef0f3', width: 1 },
          ticks: { stroke: '#dde1e6', width: 1, size: TICK },
          size: X_AXIS_SIZE,
          space: () => labelSpace(font),
          // The labels are elements (placeLabels); the canvas gets none.
          values: (_u, splits, _axis, _space, incr) => {
            ticks = { splits: splits.slice(), texts: splits.map((v) => axisTime(v * 1000, incr * 1000)) }
            return splits.map(() => '')
          },
        },
        {
          stroke: '#5b6470',
          grid: { stroke: '#eef0f3', width: 1 },
          ticks: { stroke: '#dde1e6', width: 1 },
          size: 64,
          ...(spec.integer === true ? { incrs: COUNT_STEPS } : {}),
          values: (_u, splits) => splits.map((v) => fmt(v)),
        },
      ],
      legend: { show: true, live: true },
      cursor: { drag: { x: false, y: false } },
      hooks: { draw: [(u) => { placeLabels(u, labels, ticks.splits, ticks.texts) }] },
    }
    el.dataset.draw = style
    const chart = new uPlot(opts, style === 'bars' ? bars(spec) : levels(spec), el)
    chart.root.querySelector('.u-wrap')?.appendChild(labels)
    placeLabels(chart, labels, ticks.splits, ticks.texts)
    this.#charts.set(el, chart)
    this.#observer.observe(el)
  }

  destroy (): void {
    this.#observer.disconnect()
    for (const c of this.#charts.values()) c.destroy()
    this.#charts.clear()
  }
}
