// Time-series line charts on uPlot (served from the package: no CDN). One chart per measure group,
// sized to its container and resized with it.
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
}

const HEIGHT = 180
const COUNT_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12]

function fillOf (color: string): string {
  // #rrggbb → a faint fill of the same colour.
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(color)
  return m === null ? 'transparent' : `rgba(${parseInt(m[1]!, 16)}, ${parseInt(m[2]!, 16)}, ${parseInt(m[3]!, 16)}, 0.10)`
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
    // Times in the dashboard's one format (format.ts), in the browser's locale and zone; the bucket is the points' spacing.
    const bucketMs = (spec.x.length > 1 ? spec.x[1]! - spec.x[0]! : 3600) * 1000
    const opts: uPlot.Options = {
      width: Math.max(200, Math.floor(el.clientWidth)),
      height: HEIGHT,
      scales: { x: { time: true, range: () => [spec.range[0], spec.range[1]] }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
      series: [
        { value: (_u, v) => (v === null || v === undefined ? '—' : bucketTime(v * 1000, bucketMs)) },
        ...spec.lines.map((l): uPlot.Series => ({
          label: l.label,
          stroke: l.color,
          width: 1.5,
          fill: l.fill === true ? fillOf(l.color) : undefined,
          spanGaps: false,
          points: { size: 4 },
          value: (_u, v) => (v === null || v === undefined ? '—' : fmt(v)),
        })),
      ],
      axes: [
        {
          stroke: '#5b6470',
          grid: { stroke: '#eef0f3', width: 1 },
          ticks: { stroke: '#dde1e6', width: 1 },
          values: (_u, splits, _axis, _space, incr) => splits.map((v) => axisTime(v * 1000, incr * 1000)),
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
    }
    const data = [spec.x.slice(), ...spec.lines.map((l) => l.values.slice())] as uPlot.AlignedData
    el.textContent = ''
    this.#charts.set(el, new uPlot(opts, data, el))
    this.#observer.observe(el)
  }

  destroy (): void {
    this.#observer.disconnect()
    for (const c of this.#charts.values()) c.destroy()
    this.#charts.clear()
  }
}
