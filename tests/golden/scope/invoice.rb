require "bigdecimal"

module Billing
  class Invoice < Base
    attr_reader :lines

    def initialize(lines)
      @lines = lines
    end

    def total(tax: 0)
      sum = lines.sum do |line|
        price = line.price
        price * line.quantity
      end
      sum * (1 + tax)
    end

    def self.build(rows)
      new(rows.map { |row| Line.new(row) })
    end
  end
end

describe Billing::Invoice do
  it "adds tax" do
    invoice = Billing::Invoice.new([])
    expect(invoice.total(tax: 0.2)).to eq(0)
  end
end
