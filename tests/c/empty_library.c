/* The empty preloaded library the load cost is measured against: no code,
 * no data, no constructor (built with cc -shared). */
