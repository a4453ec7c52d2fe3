// Coding paths, shared by the encoder and the decoder.

/// A coding path as a linked list, so that descending into a value costs no array copy.
indirect enum CBORCodingPath {
    case root
    case key(any CodingKey, CBORCodingPath)
    case index(Int, CBORCodingPath)

    func appending(_ key: any CodingKey) -> CBORCodingPath { .key(key, self) }
    func appending(index: Int) -> CBORCodingPath { .index(index, self) }

    var keys: [any CodingKey] {
        var reversed: [any CodingKey] = []
        var node = self
        while true {
            switch node {
            case .root: return reversed.reversed()
            case .key(let key, let parent): reversed.append(key); node = parent
            case .index(let i, let parent): reversed.append(CBORIndexKey(intValue: i)); node = parent
            }
        }
    }

    /// Renders a coding path for people: `items[3].count`.
    static func render(_ keys: [any CodingKey]) -> String {
        var out = ""
        for key in keys {
            if key is CBORIndexKey, let i = key.intValue {
                out += "[\(i)]"
            } else {
                if !out.isEmpty { out += "." }
                out += key.stringValue
            }
        }
        return out
    }
}
